// Check a PNG signature and read the width from the IHDR chunk with a DataView.
const png = await shop.getImage("logo");
const sig = Array.from(png.subarray(0, 8), (x) => x.toString(16).padStart(2, "0")).join(" ");
console.log(sig);
const view = new DataView(png.buffer, png.byteOffset, png.byteLength);
console.log(view.getUint32(8), String.fromCharCode(...png.subarray(12, 16)), view.getUint32(16));
console.log(png.length, png[png.length - 3], png.at(-1));
const r = await shop.$response.getImage("logo");
console.log(r.status, r.headers["content-type"], r.body instanceof Uint8Array);
