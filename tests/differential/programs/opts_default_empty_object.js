async function list(opts = {}) {
  const { limit = 2, page = 1 } = opts;
  return shop.listItems({ limit, page });
}
const a = await list();
const b = await list({ page: 2 });
console.log(a.page, b.page, a.items.length);
