const it = await shop.getItem("missing-unc");
console.log("never", it);
