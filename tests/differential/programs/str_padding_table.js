const r = await shop.listItems({ limit: 4 });
for (const it of r.items) console.log(it.id.padEnd(8, ".") + String(it.price).padStart(7));
