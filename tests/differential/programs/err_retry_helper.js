async function retry(fn, n) {
  let last;
  for (let i = 0; i < n; i++) {
    try { return await fn(i); } catch (e) { last = e; }
  }
  throw last;
}
const v = await retry((i) => shop.getItem(i < 2 ? "boom-rh" : "rh"), 4);
console.log(v.id);
try { await retry(() => shop.getItem("missing-rh"), 2); } catch (e) { console.log("gave up:", e.message.slice(0, 12)); }
