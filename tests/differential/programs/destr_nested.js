const { id, meta: { created, extra }, tags: [firstTag = "none"] } = await shop.getItem("dn");
console.log(id, created, JSON.stringify(extra), firstTag);
