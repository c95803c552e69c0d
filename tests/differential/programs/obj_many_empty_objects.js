const bag = [];
for (let i = 0; i < 50; i++) bag.push({});
await shop.getItem("many");
console.log(bag.filter((x) => Object.keys(x).length > 0).length, JSON.stringify(bag[49]));
