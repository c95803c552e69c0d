const hist = new Array(7).fill(0);
const r = await shop.listItems({ limit: 15 });
for (const it of r.items) hist[it.stock]++;
console.log(hist.join(" "));
