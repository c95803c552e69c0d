const v = await { then(resolve) { resolve(5); } };
const it = await { then: (r) => shop.getItem("thenable").then(r) };
console.log(v, it.id);
