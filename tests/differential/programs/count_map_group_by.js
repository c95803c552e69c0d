const r = await shop.listItems({ limit: 9 });
const g = Map.groupBy(r.items, (it) => it.stock % 2);
console.log([...g.keys()].sort().join(","), [...g.values()].map((v) => v.length).sort().join(","));
