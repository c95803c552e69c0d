const note = await shop.getNote("badbytes");
const r = await shop.createItem({ copy: note });
console.log(r.created.copy === note, r.created.copy.length);
