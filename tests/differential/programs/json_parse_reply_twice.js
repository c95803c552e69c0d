const r = await shop.getItem("twice");
console.log(typeof r, typeof JSON.stringify(r), JSON.parse(JSON.stringify(JSON.stringify(r))).length > 0);
