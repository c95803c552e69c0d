const r = await shop.deleteItem("dg");
const it = await shop.getItem("dg");
console.log(JSON.stringify(r), it.id);
