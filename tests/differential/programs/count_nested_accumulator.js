const byTag = {};
for (const page of [1, 2]) {
  const r = await shop.listItems({ page, limit: 4 });
  for (const it of r.items) {
    for (const t of it.tags.length ? it.tags : ["none"]) {
      byTag[t] ??= { n: 0, ids: [] };
      byTag[t].n++;
      byTag[t].ids.push(it.id);
    }
  }
}
console.log(JSON.stringify(byTag));
