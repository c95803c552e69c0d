const body = {};
const [a, b] = await Promise.all([shop.getItem("ba"), shop.getItem("bb")]);
body.sum = a.price + b.price;
body.ids = [a.id, b.id];
await shop.createItem(body);
console.log(JSON.stringify(body));
