function describe(item, opts = {}) {
  const parts = [item.name];
  if (opts.withPrice) parts.push(item.price);
  return parts.join(" @ ") + " " + Object.keys(opts).length;
}
const it = await shop.getItem("dp");
console.log(describe(it), describe(it, { withPrice: true }));
