// A reply's bytes belong to the guest: change them, re-download, get the original.
const a = await shop.download("n-16");
a[0] = 255;
a.fill(7, 8);
const b = await shop.download("n-16");
console.log(a.join(), "|", b.join());
