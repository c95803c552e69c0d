const r = await shop.listItems({ limit: 3 });
console.log("=".repeat(10));
console.log(r.items.map((i) => i.id).join(" | "));
console.log("-".repeat(10));
