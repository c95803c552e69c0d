const r = await shop.listItems({ limit: 5 });
const prices = Float64Array.from(r.items.map((i) => i.price));
console.log(prices.length, prices.reduce((a, b) => a + b, 0).toFixed(2), Array.from(prices.slice(0, 2)).join(","));
