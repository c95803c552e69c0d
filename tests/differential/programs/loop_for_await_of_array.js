const ps = ["w1", "w2", "w3"].map((id) => shop.getItem(id));
const seen = [];
for await (const it of ps) seen.push(it.id);
console.log(seen.join(""));
