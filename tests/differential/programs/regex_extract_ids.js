const note = await shop.getNote("re-17");
const m = note.match(/note (\S+)/);
console.log(m[1], m.index);
