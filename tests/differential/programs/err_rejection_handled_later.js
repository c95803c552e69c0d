const p = shop.getItem("missing-late");
await shop.getStats();
try { await p; } catch (e) { console.log("late catch", e.message.slice(0, 12)); }
