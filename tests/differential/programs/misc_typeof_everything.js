const it = await shop.getItem("ty");
console.log(typeof it, typeof it.id, typeof it.price, typeof it.owner, typeof it.tags, typeof it.nothing, typeof shop.getItem, typeof 1n, typeof Symbol());
