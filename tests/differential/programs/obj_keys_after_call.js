const summary = {};
await shop.getStats();
console.log(Object.keys(summary).length, JSON.stringify(summary));
