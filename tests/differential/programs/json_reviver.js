const it = await shop.getItem("rv");
const back = JSON.parse(JSON.stringify(it), (k, v) => (typeof v === "number" ? v * 10 : v));
console.log(back.price, back.stock);
