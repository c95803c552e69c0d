const r = await shop.createItem({ name: "café ✓ 日本 😀", note: "tab\there" });
console.log(r.created.name, r.created.note.length);
