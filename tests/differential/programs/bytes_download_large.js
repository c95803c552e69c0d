// A larger download, hashed with a simple checksum, and copied into a new buffer.
const b = await shop.download("n-100000");
let h = 0;
for (let i = 0; i < b.length; i++) h = (h * 31 + b[i]) >>> 0;
const copy = new Uint8Array(b.length + 2);
copy.set(b, 1);
console.log(b.length, h, copy[1] === b[0], copy[copy.length - 1]);
console.log(b.slice(0, 3).join(), Object.prototype.toString.call(b), b.buffer instanceof ArrayBuffer);
