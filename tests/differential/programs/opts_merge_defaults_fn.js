const defaults = { limit: 2 };
function withDefaults(o) { return Object.assign({}, defaults, o); }
const r = await shop.listItems(withDefaults({ page: 3 }));
console.log(r.page, r.next, r.items.length);
