async function* ticker() { let i = 0; while (true) yield await shop.getItem("tk" + i++); }
const out = [];
for await (const it of ticker()) { out.push(it.id); if (out.length === 3) break; }
console.log(out.join(","));
