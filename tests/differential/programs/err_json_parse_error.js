try {
  const note = await shop.getNote("np");
  JSON.parse(note);
} catch (e) {
  console.log(e.name);
}
