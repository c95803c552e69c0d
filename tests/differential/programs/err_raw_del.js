const r = await shop.del("/v1/items/rd");
console.log(JSON.stringify(r));
