const r = await shop.listItems({ limit: 10 });
const tags = new Set();
r.items.forEach((it) => it.tags.forEach((t) => tags.add(t)));
console.log([...tags].sort().join(","), tags.size);
