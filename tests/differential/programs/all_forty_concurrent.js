const ids = Array.from({ length: 40 }, (_, i) => "q" + i);
const items = await Promise.all(ids.map((id) => shop.getItem(id)));
console.log(items.length, items.filter((it) => it.active).length);
