class Order {
  items = {};
  status = "draft";
  toJSON() { return { status: this.status, count: Object.keys(this.items).length }; }
}
const o = new Order();
o.items.x = await shop.getItem("tj");
console.log(JSON.stringify(o));
