// Upload a Uint8Array; the body that arrives is exactly its bytes.
const bytes = new Uint8Array(300);
for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 255;
const r = await shop.putBlob("b1", bytes);
console.log(JSON.stringify(r));
