const it = await shop.getItem("ck");
const key = "price_" + it.id;
const o = { [key]: it.price, [`stock_${it.id}`]: it.stock };
console.log(JSON.stringify(o));
