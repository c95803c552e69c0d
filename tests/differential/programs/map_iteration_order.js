const m = new Map();
for (const id of ["z", "a", "m"]) m.set(id, (await shop.getItem(id)).stock);
m.delete("a");
m.set("a", 0);
console.log([...m.keys()].join(""), [...m.values()].join(","));
