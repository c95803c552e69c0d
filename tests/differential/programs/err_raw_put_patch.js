const a = await shop.put("/v1/items/rp", { name: "p" });
const b = await shop.patch("/v1/items/rp", { stock: 1 });
console.log(a.method, b.method, b.item.stock);
