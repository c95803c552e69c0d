const opts = {};
await shop.getStats();
opts.limit = 3;
if (opts.limit > 2) opts.tag = "red";
const r = await shop.listItems(opts);
console.log(r.items.length, JSON.stringify(opts));
