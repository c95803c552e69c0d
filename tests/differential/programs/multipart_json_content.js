const it = await shop.getItem("mj");
const r = await shop.uploadFile({ data: { filename: "item.json", content: JSON.stringify(it), type: "application/json" } });
console.log(r.kind, r.received > 100);
