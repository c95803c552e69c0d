const ids = ["m1", "m2", "m3"];
const items = await Promise.all(ids.map((id) => shop.getItem(id)));
const byId = Object.fromEntries(items.map((it) => [it.id, it.price]));
console.log(JSON.stringify(byId));
