const { getItem } = shop;
const it = await getItem("ex");
console.log(it.id);
