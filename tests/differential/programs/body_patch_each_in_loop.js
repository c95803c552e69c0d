const results = {};
for (const id of ["u1", "u2", "u3"]) {
  const r = await shop.updateItem(id, { seen: true });
  results[id] = r.changed.join("|");
}
console.log(JSON.stringify(results));
