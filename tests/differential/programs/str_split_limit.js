const note = await shop.getNote("sl");
console.log(JSON.stringify(note.split(" ", 2)), JSON.stringify("a,b,,c".split(",")));
