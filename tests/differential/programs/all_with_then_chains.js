const names = await Promise.all(["t1", "t2"].map((id) => shop.getItem(id).then((it) => it.name.toUpperCase())));
console.log(names.join(";"));
