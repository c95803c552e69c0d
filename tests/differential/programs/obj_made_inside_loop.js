const rows = [];
for (const id of ["r1", "r2", "r3"]) {
  const row = {};
  const it = await shop.getItem(id);
  row.id = it.id;
  row.stock = it.stock;
  rows.push(row);
}
console.log(JSON.stringify(rows));
