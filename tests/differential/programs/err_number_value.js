const it = await shop.getItem(42);
console.log(it.id, typeof it.id);
