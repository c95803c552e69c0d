class Base { constructor(id) { this.id = id; this.data = {}; } describe() { return "base " + this.id; } }
class Product extends Base {
  async load() { Object.assign(this.data, await shop.getItem(this.id)); return this; }
  describe() { return super.describe() + " " + this.data.name; }
}
const p = await new Product("inh").load();
console.log(p.describe(), p instanceof Base);
