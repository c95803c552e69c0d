const r = await shop.listItems({ page: null, limit: 1 });
console.log(r.page, r.items.length);
