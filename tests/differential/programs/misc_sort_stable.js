const r = await shop.listItems({ limit: 12 });
const sorted = [...r.items].sort((a, b) => a.stock - b.stock);
console.log(sorted.map((i) => i.id + ":" + i.stock).join(" "));
