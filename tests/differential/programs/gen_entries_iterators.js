const r = await shop.listItems({ limit: 3 });
for (const [i, it] of r.items.entries()) console.log(i, it.id);
console.log([...r.items.keys()].join(""), [..."ab"].entries().next().value.join(":"));
