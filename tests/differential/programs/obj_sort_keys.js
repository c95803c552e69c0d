const it = await shop.getItem("sk");
const sorted = Object.fromEntries(Object.entries(it).sort(([a], [b]) => a.localeCompare(b)));
console.log(Object.keys(sorted).join(","));
