const counts = new Map();
const r = await shop.listItems({ limit: 10 });
for (const it of r.items) counts.set(it.stock, (counts.get(it.stock) || 0) + 1);
console.log([...counts.entries()].sort((a, b) => a[0] - b[0]).map(([k, v]) => k + "x" + v).join(" "));
