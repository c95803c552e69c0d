const ids = Array.from({ length: 20 }, (_, i) => "c" + i);
const items = await Promise.all(ids.map((id) => shop.getItem(id)));
console.log(items.length, items.reduce((s, it) => s + it.stock, 0));
