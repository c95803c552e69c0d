const r = await shop.call("GET", "/v1/items/raw1");
console.log(r.id, r.name);
