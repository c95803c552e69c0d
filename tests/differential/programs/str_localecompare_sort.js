const r = await shop.listItems({ limit: 6 });
const names = r.items.map((i) => i.name).sort((a, b) => b.localeCompare(a));
console.log(names.join(";"));
