const [note, item, users] = await Promise.all([shop.getNote("mk"), shop.getItem("mk"), shop.listUsers({ org: "acme" })]);
console.log(note.split("\n")[0], item.id, users.users.length);
