function* nums() { try { yield 1; yield 2; yield 3; } finally { console.log("cleanup"); } }
for (const n of nums()) { await shop.getItem("n" + n); if (n === 2) break; }
console.log("done");
