const r = await shop.searchItems({ q: "café ✓ 日本" });
console.log(r.q);
