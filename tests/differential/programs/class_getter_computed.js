class Cart {
  lines = [];
  add(item, qty) { this.lines.push({ item, qty }); }
  get total() { return this.lines.reduce((s, l) => s + l.item.price * l.qty, 0); }
}
const cart = new Cart();
cart.add(await shop.getItem("cg1"), 2);
cart.add(await shop.getItem("cg2"), 1);
console.log(cart.total.toFixed(2), cart.lines.length);
