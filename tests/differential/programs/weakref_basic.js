const it = await shop.getItem("wr");
const ref = new WeakRef(it);
console.log(ref.deref() === it, ref.deref().id);
