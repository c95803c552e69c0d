const acc = {};
await shop.getItem("z");
acc.k = 1;
const keys = [];
for (const k in acc) keys.push(k);
console.log(keys.join(","));
