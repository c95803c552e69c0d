const body = { n: 0 };
const outs = [];
for (let i = 0; i < 3; i++) {
  body.n = i;
  const r = await shop.createItem(body);
  outs.push(r.created.n);
}
console.log(outs.join(","));
