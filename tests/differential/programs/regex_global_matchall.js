const note = await shop.getNote("ma");
const words = [...note.matchAll(/\b(\w)(\w*)/g)].map((m) => m[1].toUpperCase() + m[2]);
console.log(words.join(" "));
