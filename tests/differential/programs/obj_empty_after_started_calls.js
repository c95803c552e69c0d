const ps = [shop.getItem("e1"), shop.getItem("e2")];
const o = {};
await Promise.all(ps);
o.done = ps.length;
console.log(JSON.stringify(o));
