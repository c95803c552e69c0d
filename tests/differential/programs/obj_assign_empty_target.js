const merged = Object.assign({}, {});
const it = await shop.getItem("m");
Object.assign(merged, { id: it.id });
console.log(JSON.stringify(merged));
