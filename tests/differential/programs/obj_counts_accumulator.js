const counts = {};
const list = await shop.listItems({ limit: 6 });
for (const it of list.items) for (const t of it.tags) counts[t] = (counts[t] || 0) + 1;
console.log(JSON.stringify(counts));
