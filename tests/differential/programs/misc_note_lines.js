const note = await shop.getNote("ln");
for (const [i, line] of note.split("\n").entries()) if (line) console.log(i, line.length, line);
