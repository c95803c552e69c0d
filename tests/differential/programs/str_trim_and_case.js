const note = await shop.getNote("  tr  ");
console.log(JSON.stringify(note.trim()), JSON.stringify(note.trimEnd().split("\n").pop()));
