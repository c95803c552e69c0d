class Bag { items = {}; }
const a = new Bag();
await shop.getStats();
const b = new Bag();
a.items.x = 1;
console.log(JSON.stringify(a.items), JSON.stringify(b.items), a.items === b.items);
