const a = await shop.getItem("eq");
const b = await shop.getItem("eq");
console.log(a === b, JSON.stringify(a) === JSON.stringify(b));
