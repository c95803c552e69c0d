class Config {
  static defaults;
  static { Config.defaults = { limit: 2 }; }
}
const r = await shop.listItems(Config.defaults);
console.log(r.items.length);
