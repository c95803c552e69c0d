const it = await shop.getItem("pp");
const patch = {};
if (it.stock < 10) patch.stock = it.stock + 10;
patch.name = it.name.toUpperCase();
const r = await shop.updateItem(it.id, patch);
console.log(JSON.stringify(r.changed), r.item.name);
