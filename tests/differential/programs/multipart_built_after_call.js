const parts = {};
const note = await shop.getNote("mp");
parts.file = { filename: "note.txt", content: note };
parts.source = "note";
const r = await shop.uploadFile(parts);
console.log(r.kind);
