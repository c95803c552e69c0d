const a = {};
const b = {};
await shop.getItem("a1");
a.first = 1;
await shop.getItem("b2");
b.second = 2;
console.log(JSON.stringify(a), JSON.stringify(b));
