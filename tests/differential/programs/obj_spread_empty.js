const base = {};
await shop.getItem("sp");
const next = { tag: "x", ...base };
console.log(JSON.stringify(next));
