const big = "é✓".repeat(60000) + "end";
const r = await shop.createItem({ big });
console.log(r.created.big.length, r.created.big.endsWith("end"));
