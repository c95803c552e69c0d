const ids = Array.from({ length: 3 }, (_, i) => `af${i}`);
const items = await Promise.all(ids.map(shop.getItem));
console.log(items.map((i) => i.id).join(","));
