const it = await shop.getItem("sb");
const body = { ...it.attrs, note: "from spread" };
const r = await shop.createItem(body);
console.log(JSON.stringify(r.created));
