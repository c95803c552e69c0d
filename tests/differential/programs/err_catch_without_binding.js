let ok = true;
try { await shop.getItem("boom-nb"); } catch { ok = false; }
console.log(ok);
