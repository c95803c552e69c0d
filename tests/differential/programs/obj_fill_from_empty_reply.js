const e = await shop.getItem("empty");
e.added = "yes";
const other = {};
other.x = 1;
console.log(JSON.stringify(e), JSON.stringify(other));
