const seen = new Set();
const dupes = [];
for (const id of ["s1", "s2", "s1", "s3", "s2"]) {
  if (seen.has(id)) { dupes.push(id); continue; }
  seen.add(id);
  await shop.getItem(id);
}
console.log(dupes.join(","), seen.size);
