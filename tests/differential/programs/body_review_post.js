const item = await shop.getItem("rev");
const review = {};
review.stars = 4;
review.text = `Nice ${item.name}`;
const r = await shop.addReview(item.id, review);
console.log(r.ok, JSON.stringify(r.review));
