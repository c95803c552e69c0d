const ids = Array.from({ length: 10 }, (_, i) => "o" + i);
const items = await Promise.all(ids.map((id) => shop.getItem(id)));
console.log(items.every((it, i) => it.id === ids[i]));
