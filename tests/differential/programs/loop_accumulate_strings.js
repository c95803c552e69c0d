let text = "";
for (const id of ["n1", "n2"]) text += await shop.getNote(id);
console.log(text.split("\n").filter(Boolean).length, JSON.stringify(text.slice(0, 12)));
