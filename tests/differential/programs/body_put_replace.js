const it = await shop.getItem("put1");
const r = await shop.replaceItem(it.id, { name: "replaced", price: 1 });
console.log(r.method, r.item.name, r.item.price);
