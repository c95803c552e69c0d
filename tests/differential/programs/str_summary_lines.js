const r = await shop.listItems({ limit: 5 });
const lines = r.items.map((it, i) => `${i + 1}. ${it.name} (${it.active ? "active" : "inactive"}) x${it.stock}`);
console.log(lines.join("\n"));
