const result = {};
const item = await shop.getItem("a1");
result.name = item.name;
result.price = item.price;
console.log(JSON.stringify(result));
