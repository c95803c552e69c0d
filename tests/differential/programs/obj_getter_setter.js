const box = {
  _v: 0,
  get value() { return this._v; },
  set value(x) { this._v = x * 2; },
};
const it = await shop.getItem("gs");
box.value = it.stock;
console.log(box.value, JSON.stringify(box));
