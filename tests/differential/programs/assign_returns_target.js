const target = {};
await shop.getItem("rt");
const r = Object.assign(target, { q: 1 });
console.log(r === target, JSON.stringify(target));
