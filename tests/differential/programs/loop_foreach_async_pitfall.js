const out = [];
const pending = ["fa", "fb"].map(async (id) => { const it = await shop.getItem(id); out.push(it.id); });
console.log("immediately", out.length);
await Promise.all(pending);
console.log("later", out.sort().join(","));
