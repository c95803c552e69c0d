const r = await shop.createItem({ s: "\u2028\u2029", lone: "\ud800" });
console.log(JSON.stringify(r.created), r.created.s.length);
