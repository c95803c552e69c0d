const r = await shop.createItem({ int: 42, neg: -7, float: 3.14159, big: 1e21, tiny: 5e-7, negzero: -0 });
console.log(JSON.stringify(r.created));
