const proto = { greet() { return "hi " + this.name; } };
const it = await shop.getItem("pc");
const o = Object.create(proto);
o.name = it.name;
console.log(o.greet(), Object.keys(o).join());
