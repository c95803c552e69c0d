const ids = ["ok-1", "bad id", "fine_2", "x/y"];
const valid = ids.filter((id) => /^[\w-]+$/.test(id));
const items = await Promise.all(valid.map((id) => shop.getItem(id)));
console.log(items.map((i) => i.id).join(","));
