const o = {};
await shop.getStats();
o.b = 1; o[2] = "two"; o.a = 3; o[1] = "one"; o["10"] = "ten";
console.log(Object.keys(o).join(","));
