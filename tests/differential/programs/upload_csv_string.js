// Build a CSV from objects and upload it as text/csv.
const rows = [
  { sku: "a1", name: "Café crème", qty: 3 },
  { sku: "b2", name: 'Say "hi", ok', qty: 0 },
  { sku: "c3", name: "日本", qty: 12 },
];
const esc = (v) => (/[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
const csv = ["sku,name,qty", ...rows.map((r) => [r.sku, r.name, r.qty].map(esc).join(","))].join("\r\n") + "\r\n";
const r = await shop.importCsv(csv);
console.log(JSON.stringify(r));
