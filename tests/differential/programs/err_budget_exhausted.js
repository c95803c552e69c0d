let ok = 0, refused = 0, first = "";
for (let i = 0; i < 205; i++) {
  try { await shop.getStats(); ok++; }
  catch (e) { refused++; first ||= e.message.slice(0, 13); }
}
console.log(ok, refused, first);
