const r = await shop.listItems({ limit: 9 });
const groups = Object.groupBy(r.items, (it) => (it.price > 50 ? "high" : "low"));
console.log(Object.keys(groups).sort().join(","), (groups.high || []).length + (groups.low || []).length);
