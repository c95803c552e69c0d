const re = /\d+/g;
const note = await shop.getNote("n123x456");
const found = [];
let m;
while ((m = re.exec(note)) !== null) found.push(m[0] + "@" + m.index);
console.log(found.join(","));
