const r = await shop.createItem({ a: null, b: undefined, c: [undefined, null], d: "" });
console.log(JSON.stringify(r.created));
