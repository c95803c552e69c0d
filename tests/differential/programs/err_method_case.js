const r = await shop.call("get", "/v1/items/lower");
console.log(r.id);
