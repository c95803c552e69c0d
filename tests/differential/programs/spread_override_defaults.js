const defaults = { limit: 2, page: 1 };
const opts = { ...defaults, page: 2 };
const r = await shop.listItems(opts);
console.log(r.page, r.items.length);
