const cfg = Object.freeze({ mode: "safe" });
await shop.getStats();
console.log(JSON.stringify(cfg), Object.isFrozen(cfg));
