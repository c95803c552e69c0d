const r = await shop.listItems({ limit: 3 });
for (const { id, stock, attrs: { color = "?" } } of r.items) console.log(id, stock, color);
