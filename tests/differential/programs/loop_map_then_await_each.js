const pending = ["e1", "e2", "e3"].map((id) => shop.getItem(id));
const out = [];
for (const p of pending) out.push((await p).stock);
console.log(out.join("-"));
