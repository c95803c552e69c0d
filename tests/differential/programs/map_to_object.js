const m = new Map();
const its = await Promise.all(["t1", "t2"].map((id) => shop.getItem(id)));
its.forEach((it) => m.set(it.id, it.stock));
console.log(JSON.stringify(Object.fromEntries(m)), JSON.stringify(m));
