const out = [];
for (let i = 0; i < 5; i++) {
  const it = await shop.getItem("i" + i);
  if (it.active) out.push(i);
}
console.log(out.join(","));
