const r = await shop.listItems({ limit: 8 });
const totals = r.items.reduce((acc, it) => { acc[it.active ? "on" : "off"] += it.stock; return acc; }, { on: 0, off: 0 });
console.log(JSON.stringify(totals));
