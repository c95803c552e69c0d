// Upload an ArrayBuffer, a subarray (offset into a larger buffer) and a DataView.
const buf = new ArrayBuffer(16);
new Uint8Array(buf).forEach((_, i, a) => (a[i] = 200 + i));
console.log(JSON.stringify(await shop.putBlob("ab", buf)));
const big = new Uint8Array([9, 8, 7, 6, 5, 4, 3, 2, 1]);
console.log(JSON.stringify(await shop.putBlob("sub", big.subarray(3, 7))));
console.log(JSON.stringify(await shop.putBlob("dv", new DataView(buf, 4, 4))));
console.log(JSON.stringify(await shop.putBlob("u16", new Uint16Array([1, 258]))));
