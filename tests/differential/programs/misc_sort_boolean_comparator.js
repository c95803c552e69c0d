const r = await shop.listItems({ limit: 12 });
const byPrice = [...r.items].sort((a, b) => a.price > b.price);
console.log(byPrice.map((i) => i.price).join(","));
