const it = await shop.getItem("rf");
console.log(it.name.replace(/\b\w/g, (c) => c.toUpperCase()), "a-b-c".replace(/-/g, "_"));
