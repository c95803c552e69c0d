const r = await shop.createItem("just a string");
console.log(JSON.stringify(r.created));
