// A binary reply is a Uint8Array of exactly its bytes.
const b = await shop.download("all");
console.log(b instanceof Uint8Array, b.length, b[0], b[127], b[128], b[255]);
let sum = 0;
for (const x of b) sum += x;
console.log(sum, Array.from(b.subarray(250)).join());
const e = await shop.download("empty");
console.log(e instanceof Uint8Array, e.length, e.byteOffset, e.buffer.byteLength);
