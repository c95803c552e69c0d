const a = await shop.listReviews("rs", { sort: "new" });
const b = await shop.listReviews("rs", {});
const c = await shop.listReviews("rs");
console.log(a.sort, b.sort, c.sort, a.reviews.map((r) => r.stars).join(""));
