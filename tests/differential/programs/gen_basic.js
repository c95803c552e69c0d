function* ids(n) { for (let i = 0; i < n; i++) yield "g" + i; }
const got = [];
for (const id of ids(4)) got.push((await shop.getItem(id)).stock);
console.log(got.join(","));
