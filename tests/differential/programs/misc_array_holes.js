const a = [1, , 3];
await shop.getStats();
console.log(a.length, 1 in a, JSON.stringify(a), a.map((x) => x * 2).join(), Object.keys(a).join());
