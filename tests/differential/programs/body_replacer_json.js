const it = await shop.getItem("rj");
const text = JSON.stringify(it, ["id", "name", "price"]);
const r = await shop.createItem(JSON.parse(text));
console.log(text, JSON.stringify(r.created));
