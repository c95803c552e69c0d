const ids = ["a", "b", "c", "d"];
const items = await Promise.all(ids.map((id) => shop.getItem(id)));
console.log(items.map((i) => `${i.id}:${i.stock}`).join(" "));
