let total = 0;
for (const id of ["x1", "x2", "x3", "x4"]) {
  const it = await shop.getItem(id);
  total += it.price;
}
console.log(total.toFixed(2));
