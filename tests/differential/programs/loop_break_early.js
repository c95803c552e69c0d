let found = null;
for (let i = 0; i < 20; i++) {
  const it = await shop.getItem("f" + i);
  if (it.stock === 0) { found = it.id; break; }
}
console.log(found);
