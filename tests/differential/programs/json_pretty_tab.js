const it = await shop.getItem("tab");
console.log(JSON.stringify(it.attrs, null, "\t"));
