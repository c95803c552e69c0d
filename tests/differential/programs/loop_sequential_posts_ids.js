const created = [];
for (const name of ["a", "b", "c"]) {
  const r = await shop.createItem({ name });
  created.push(r.created.name + "=" + r.id);
}
console.log(created.join(" "));
