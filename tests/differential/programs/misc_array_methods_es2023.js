const r = await shop.listItems({ limit: 6 });
const prices = r.items.map((i) => i.price);
console.log(prices.toSorted((a, b) => a - b).join(","), prices.toReversed()[0], prices.with(0, -1)[0], prices.findLast((p) => p > 0), prices.findLastIndex((p) => p > 1000), prices.at(-1));
