const o = {};
await shop.getStats();
console.log(JSON.stringify(Object.getOwnPropertyNames(o)));
