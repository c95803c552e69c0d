const r = await shop.listItems({ limit: 4 });
const text = JSON.stringify(r.items);
let h = 0x811c9dc5;
for (let i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
console.log(h.toString(16));
