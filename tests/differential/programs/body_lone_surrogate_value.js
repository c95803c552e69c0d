const r = await shop.createItem({ s: "x\udc00y", pair: "\ud83d\ude00" });
console.log(JSON.stringify(r.created), r.created.s.length);
try {
  await shop.getItem("v\ud800");
  console.log("sent");
} catch (e) {
  console.log("refused", e.name);
}
