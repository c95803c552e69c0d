const seen = {};
await shop.getItem("x");
console.log("status" in seen, "body" in seen, seen.status === undefined);
