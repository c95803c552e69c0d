const note = await shop.getNote("long-3000");
const lines = note.split("\n");
console.log(note.length, lines.length, lines[2999], [...note].length);
