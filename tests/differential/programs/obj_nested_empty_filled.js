const report = { items: {}, totals: {} };
const list = await shop.listItems({ limit: 4 });
for (const it of list.items) report.items[it.id] = it.price;
report.totals.count = list.items.length;
console.log(JSON.stringify(report));
