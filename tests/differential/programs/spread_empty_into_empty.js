const x = {};
const y = {};
await shop.getStats();
console.log(JSON.stringify({ ...x, ...y }));
