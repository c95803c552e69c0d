const a = new Int32Array([5, -1, 3, 10, 0]);
await shop.getItem("srt");
a.sort();
const b = new Uint8Array(3);
b.set([1, 2, 300 & 255]);
console.log(a.join(","), b.join(","));
