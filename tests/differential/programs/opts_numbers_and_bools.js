const r = await shop.searchItems({ q: 12.5 });
const s = await shop.searchItems({ q: true });
console.log(r.q, s.q);
