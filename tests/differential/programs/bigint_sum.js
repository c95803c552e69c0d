const r = await shop.listItems({ limit: 5 });
const total = r.items.reduce((s, it) => s + BigInt(it.stock), 0n);
console.log(total, typeof total, String(total * 10n ** 20n));
