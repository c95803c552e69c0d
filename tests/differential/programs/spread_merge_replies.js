const a = await shop.getItem("a");
const b = await shop.getItem("b");
const merged = { ...a, ...b, both: [a.id, b.id] };
console.log(merged.id, merged.both.join("+"), Object.keys(merged).length);
