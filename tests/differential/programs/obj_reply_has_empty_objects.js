const it = await shop.getItem("a1");
console.log(JSON.stringify(it.meta.extra), Object.keys(it.meta.extra).length, JSON.stringify(it.reviews));
