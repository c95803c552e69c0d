const ids = ["ra", "rb", "rc"];
const total = await ids.reduce(async (accP, id) => {
  const acc = await accP;
  const it = await shop.getItem(id);
  return acc + it.stock;
}, Promise.resolve(0));
console.log(total);
