const it = await shop.getItem("cp");
const copy = JSON.parse(JSON.stringify(it));
copy.name = "changed";
console.log(it.name, copy.name, JSON.stringify(copy.meta));
