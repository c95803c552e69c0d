let page = 0, pages = 0;
do {
  page++;
  const r = await shop.listItems({ page });
  pages += r.items.length ? 1 : 0;
} while (page < 4);
console.log(pages);
