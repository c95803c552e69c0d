const r = await shop.listItems({ limit: 10 });
const groups = new Map();
for (const it of r.items) {
  const k = it.tags.length ? it.tags[0] : "untagged";
  if (!groups.has(k)) groups.set(k, []);
  groups.get(k).push(it.id);
}
console.log(JSON.stringify([...groups]));
