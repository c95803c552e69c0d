const r = await shop.createItem([1, "two", { three: 3 }]);
console.log(JSON.stringify(r.created));
