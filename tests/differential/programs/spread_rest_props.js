const it = await shop.getItem("rp");
const { id, name, ...rest } = it;
console.log(id, name, Object.keys(rest).sort().join(","));
