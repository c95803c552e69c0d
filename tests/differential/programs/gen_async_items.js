async function* allItems() {
  for (let page = 1; page <= 2; page++) {
    const r = await shop.listItems({ page, limit: 3 });
    yield* r.items;
  }
}
const ids = [];
for await (const it of allItems()) ids.push(it.id);
console.log(ids.join(" "));
