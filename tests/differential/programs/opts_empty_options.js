const r = await shop.listItems({});
console.log(r.page, r.items.length);
