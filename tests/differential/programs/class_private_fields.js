class Counter {
  #n = 0;
  #log = {};
  bump(k) { this.#n++; this.#log[k] = (this.#log[k] || 0) + 1; }
  get total() { return this.#n; }
  dump() { return JSON.stringify(this.#log); }
}
const c = new Counter();
const list = await shop.listItems({ limit: 5 });
for (const it of list.items) c.bump(it.active ? "active" : "inactive");
console.log(c.total, c.dump(), JSON.stringify(c));
