const o = Object.seal({ a: 1 });
await shop.getItem("seal");
o.a = 2;
try { o.b = 3; } catch (e) { console.log("threw", e.name); }
console.log(JSON.stringify(o));
