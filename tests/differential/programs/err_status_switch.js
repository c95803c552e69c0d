async function status(id) {
  try { await shop.getItem(id); return 200; }
  catch (e) { return Number(e.message.split(" ")[2].replace(":", "")); }
}
const out = {};
for (const id of ["s1", "missing-s", "boom-s"]) out[id] = await status(id);
console.log(JSON.stringify(out));
