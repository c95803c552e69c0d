function* take(it, n) { let i = 0; for (const x of it) { if (i++ >= n) return; yield x; } }
const r = await shop.listItems({ limit: 10 });
console.log([...take(r.items.map((i) => i.id), 3)].join(","));
