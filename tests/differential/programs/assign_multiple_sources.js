const it = await shop.getItem("ms");
const o = Object.assign({}, { a: 1 }, it.attrs, null, undefined, { b: 2 });
console.log(JSON.stringify(o));
