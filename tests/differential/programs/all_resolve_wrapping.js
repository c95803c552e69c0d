const p = Promise.resolve(shop.getItem("rw"));
const it = await p;
console.log(it.id, p instanceof Promise);
