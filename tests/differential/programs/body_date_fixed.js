const d = new Date(Date.UTC(2026, 0, 15, 10, 30));
const r = await shop.createItem({ when: d, iso: d.toISOString() });
console.log(JSON.stringify(r.created));
