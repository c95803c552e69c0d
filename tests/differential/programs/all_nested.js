const [stats, pages] = await Promise.all([
  shop.getStats(),
  Promise.all([1, 2].map((page) => shop.listItems({ page, limit: 2 }))),
]);
console.log(stats.count, pages.map((p) => p.items.length).join(","));
