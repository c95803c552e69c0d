const it = await shop.getItem("nul");
const record = [it.id, it.name].join("\0");
console.log(record.length, JSON.stringify(record));
console.log(record.split("\0").join(" | "));
console.log(record, "after");
