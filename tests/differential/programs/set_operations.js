const a = new Set((await shop.listItems({ page: 1, limit: 4 })).items.map((i) => i.stock));
const b = new Set((await shop.listItems({ page: 2, limit: 4 })).items.map((i) => i.stock));
const inter = [...a].filter((x) => b.has(x));
const union = new Set([...a, ...b]);
console.log(inter.sort().join(","), [...union].sort().join(","));
