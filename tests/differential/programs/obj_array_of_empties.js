const slots = [{}, {}, {}];
const items = await Promise.all(["a", "b", "c"].map((id) => shop.getItem(id)));
items.forEach((it, i) => { slots[i].id = it.id; });
console.log(JSON.stringify(slots));
