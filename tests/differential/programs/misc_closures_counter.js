function makeCounter() { let n = 0; return { inc: () => ++n, get: () => n }; }
const c = makeCounter();
const r = await shop.listItems({ limit: 4 });
r.items.forEach(() => c.inc());
console.log(c.get());
