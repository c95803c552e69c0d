const r = await shop.listItems({ limit: 5 });
console.log(JSON.stringify(r.items.map((i) => i.tags).flat()), r.items.flatMap((i) => [i.id, i.stock]).length, [[1, [2, [3]]]].flat(Infinity).join());
