const note = await shop.getNote("sp");
console.log(JSON.stringify(note.split(/\s+/).filter(Boolean)));
