const sizes = [170, 171, 172, 256, 257];
for (const n of sizes) {
  const note = await shop.getNote("long-" + n);
  console.log(n, note.length, note.slice(-18).trim());
}
