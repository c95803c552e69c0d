// Code planted on Array.prototype and Object.prototype before any call: it must not run
// between a generated method and the client, so $response keeps its whole reply and a
// left-out path argument stays undefined.
let planted = 0;
const sneak = () => { planted++; };
for (const name of ["slice", "push", "concat", "map"]) {
  const real = Array.prototype[name];
  Array.prototype[name] = function (...a) { sneak(); return real.apply(this, a); };
}
Object.defineProperty(Array.prototype, 1, {
  get() { sneak(); return "planted"; },
  set(v) { Object.defineProperty(this, 1, { __proto__: null, value: v, writable: true, enumerable: true, configurable: true }); },
  configurable: true,
});
const r = await shop.$response.getItem("a1");
console.log(r.status, typeof r.headers, JSON.stringify(r.body));
try { await shop.getItem(); console.log("sent"); } catch (e) { console.log(e.name); }
console.log(shop.getItem.name, shop.getItem.length, shop.listItems.length, planted > 0);
