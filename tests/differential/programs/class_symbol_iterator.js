class Page {
  constructor(items) { this.items = items; }
  *[Symbol.iterator]() { for (const it of this.items) yield it.id; }
}
const r = await shop.listItems({ limit: 3 });
console.log([...new Page(r.items)].join(","));
