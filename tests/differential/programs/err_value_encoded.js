const it = await shop.getItem("a b@c%d");
console.log(it.id);
