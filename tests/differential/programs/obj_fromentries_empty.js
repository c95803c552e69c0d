const m = Object.fromEntries([]);
await shop.getStats();
m.z = 26;
console.log(JSON.stringify(m));
