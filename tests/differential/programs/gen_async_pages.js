async function* pages() {
  let page = 1;
  while (page) {
    const r = await shop.listItems({ page, limit: 2 });
    yield r.items;
    page = r.next;
  }
}
let count = 0;
for await (const items of pages()) count += items.length;
console.log(count);
