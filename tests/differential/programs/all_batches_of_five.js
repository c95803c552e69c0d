const ids = Array.from({ length: 12 }, (_, i) => "b" + i);
const out = [];
for (let i = 0; i < ids.length; i += 5) {
  const batch = await Promise.all(ids.slice(i, i + 5).map((id) => shop.getItem(id)));
  out.push(batch.length);
}
console.log(out.join(","));
