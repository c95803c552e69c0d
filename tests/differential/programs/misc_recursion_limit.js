function depth(n) { return depth(n + 1) + 1; }
await shop.getStats();
try { depth(0); } catch (e) { console.log(e instanceof RangeError || e.name === "InternalError"); }
const it = await shop.getItem("after-overflow");
console.log(it.id);
