const list = await shop.listItems({ limit: 3 });
const summary = {};
for (const it of list.items) {
  const { reviews } = await shop.listReviews(it.id, { sort: "old" });
  summary[it.id] = reviews.reduce((s, r) => s + r.stars, 0) / reviews.length;
}
console.log(JSON.stringify(summary));
