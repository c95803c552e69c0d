const bodies = [{ n: 1 }, { n: 2 }, { n: 3 }];
const rs = await Promise.all(bodies.map((b) => shop.createItem(b)));
console.log(rs.map((r) => r.created.n).join(""));
