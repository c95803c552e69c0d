function* acc() { let total = 0; while (true) { const v = yield total; total += v; } }
const g = acc();
g.next();
for (const id of ["s1", "s2", "s3"]) g.next((await shop.getItem(id)).stock);
console.log(g.next(0).value);
