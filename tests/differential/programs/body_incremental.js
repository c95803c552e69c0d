const body = {};
body.name = "widget";
const it = await shop.getItem("inc");
body.price = it.price;
body.tags = [];
body.tags.push("new");
const r = await shop.createItem(body);
console.log(JSON.stringify(r));
