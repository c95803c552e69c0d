const r = await shop.listItems({ limit: 6 });
function* gen() { yield* r.items; }
const arr = Array.from(gen(), (it) => it.stock);
console.log(arr.join(","));
