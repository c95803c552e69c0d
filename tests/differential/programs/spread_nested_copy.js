const it = await shop.getItem("nc");
const copy = { ...it, meta: { ...it.meta, extra: { ...it.meta.extra, seen: true } } };
console.log(JSON.stringify(copy.meta), JSON.stringify(it.meta));
