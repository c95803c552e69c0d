let page = 1;
const ids = [];
while (page) {
  const r = await shop.listItems({ page, limit: 2 });
  ids.push(...r.items.map((i) => i.id));
  page = r.next;
}
console.log(ids.join(","));
