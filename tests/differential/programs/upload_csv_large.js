// A larger CSV upload built in a loop, with a lone surrogate-free emoji column.
let csv = "n,square,mark\n";
for (let i = 0; i < 5000; i++) csv += `${i},${i * i},${i % 3 ? "✓" : "😀"}\n`;
const r = await shop.importCsv(csv);
console.log(r.received, r.rows, r.header.join("|"), r.kind);
