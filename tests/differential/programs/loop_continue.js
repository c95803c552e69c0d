const names = [];
for (const id of ["c1", "missing-c", "c2"]) {
  let it;
  try { it = await shop.getItem(id); } catch { continue; }
  names.push(it.name);
}
console.log(names.join(";"));
