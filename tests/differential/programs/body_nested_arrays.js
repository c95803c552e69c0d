const body = { lines: [] };
for (const id of ["l1", "l2"]) {
  const it = await shop.getItem(id);
  body.lines.push({ id: it.id, qty: it.stock, opts: {} });
}
const r = await shop.createItem(body);
console.log(JSON.stringify(r.created));
