const r = await shop.searchItems({ filter: { color: "red", size: "L" } });
console.log(JSON.stringify(r.params));
