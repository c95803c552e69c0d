let i = 0;
const got = [];
while (true) {
  const it = await shop.getItem("wt" + i);
  got.push(it.stock);
  if (++i >= 3) break;
}
console.log(got.join(","));
