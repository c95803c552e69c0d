const r = await shop.listItems({ limit: 8, tag: "sale" });
console.log(r.items.length, r.items.map((i) => i.id).join(","));
