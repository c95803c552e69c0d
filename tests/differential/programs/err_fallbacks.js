async function getOr(id, fallback) {
  try { return await shop.getItem(id); } catch { return fallback; }
}
const items = await Promise.all(["g1", "missing-g", "boom-g"].map((id) => getOr(id, { id: "default" })));
console.log(items.map((i) => i.id).join(","));
