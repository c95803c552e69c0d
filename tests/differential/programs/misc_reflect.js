const it = await shop.getItem("rf");
console.log(Reflect.has(it, "id"), Reflect.ownKeys(it).length, Reflect.get(it, "name"));
