const p1 = await shop.listItems({ page: 1, limit: 2 });
const p2 = await shop.listItems({ page: 2, limit: 2 });
const all = [...p1.items, ...p2.items];
console.log(all.map((i) => i.id).join(","));
