const body = { values: Array.from({ length: 300 }, (_, i) => i * i) };
const r = await shop.createItem(body);
console.log(r.created.values.length, r.created.values[299]);
