const meta = new WeakMap();
const it = await shop.getItem("wm");
meta.set(it, { fetched: 1 });
console.log(meta.get(it).fetched, meta.has({}));
