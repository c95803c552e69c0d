const counts = {};
await shop.getStats();
for (const k of ["a", "b", "a", "c", "a"]) counts[k] = (counts[k] ?? 0) + 1;
console.log(JSON.stringify(counts));
