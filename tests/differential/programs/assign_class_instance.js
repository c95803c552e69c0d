class Item { constructor() { this.kind = "item"; } label() { return this.kind + ":" + this.id; } }
const raw = await shop.getItem("ci");
const item = Object.assign(new Item(), raw);
console.log(item.label(), item instanceof Item);
