const note = await shop.getNote("uni");
console.log(/é/u.test(note), note.match(/\p{L}+/gu).length, /✓/.test(note));
