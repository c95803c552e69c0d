let ok = 0;
for (let i = 0; i < 30; i++) { await shop.getItem("bud" + (i % 3)); ok++; }
console.log(ok);
