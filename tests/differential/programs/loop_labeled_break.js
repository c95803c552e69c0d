const hits = [];
outer: for (const p of [1, 2, 3]) {
  const r = await shop.listItems({ page: p, limit: 3 });
  for (const it of r.items) {
    hits.push(it.id);
    if (hits.length === 4) break outer;
  }
}
console.log(hits.join(","));
