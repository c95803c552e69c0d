shop.getItem("missing-unhandled");
await shop.getStats();
await shop.getStats();
console.log("still ran to the end");
