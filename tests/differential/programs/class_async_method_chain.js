class Builder {
  body = {};
  set(k, v) { this.body[k] = v; return this; }
  async send() { return shop.createItem(this.body); }
}
const r = await new Builder().set("a", 1).set("b", [2]).send();
console.log(JSON.stringify(r.created));
