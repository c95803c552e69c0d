const note = await shop.getNote("badbytes");
console.log(note.length, [...note].map((c) => c.codePointAt(0).toString(16)).join(" "));
console.log(JSON.stringify(note), note.isWellFormed());
