const bytes = new Uint8Array([104, 105, 32, 226, 156, 147]);
await shop.getStats();
const text = decodeURIComponent(Array.from(bytes, (b) => "%" + b.toString(16).padStart(2, "0")).join(""));
console.log(text, text.length);
