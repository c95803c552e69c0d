const counts = {};
const r = await shop.listItems({ limit: 12 });
for (const it of r.items) counts[it.stock] = (counts[it.stock] || 0) + 1;
console.log(JSON.stringify(counts));
