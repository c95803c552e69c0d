const it = await shop.getItem("café-✓");
console.log(it.id, it.name);
