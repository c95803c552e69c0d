const a = JSON.parse("{}");
const b = JSON.parse("[]");
await shop.getItem("pe");
const c = JSON.parse("{}");
console.log(JSON.stringify([a, b, c]), Object.keys(c).length);
