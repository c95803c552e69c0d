const r = await shop.listItems({ page: undefined, limit: 2, tag: undefined });
console.log(r.page, r.items.length);
