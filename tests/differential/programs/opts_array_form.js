const r = await shop.searchItems({ ids: ["a", "b", "c"] });
console.log(JSON.stringify(r.params));
