const note = await shop.getNote("jt");
console.log(typeof note, JSON.stringify(note));
