const m = new Map([["x", 1], ["y", 2]]);
await shop.getItem("fm");
m.set("z", 3);
const r = await shop.createItem(Object.fromEntries(m));
console.log(JSON.stringify(r.created));
