const it = await shop.getItem("chars");
console.log([...it.name].length, [...new Set(it.name)].join(""));
