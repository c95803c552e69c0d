const key1 = { id: 1 };
const m = new Map([[key1, "first"]]);
await shop.getItem("mk");
m.set({ id: 1 }, "second");
console.log(m.size, m.get(key1));
