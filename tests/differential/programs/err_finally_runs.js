const log = [];
async function work() {
  try { log.push("try"); await shop.getItem("missing-f"); log.push("unreached"); }
  catch (e) { log.push("catch"); return "handled"; }
  finally { log.push("finally"); }
}
console.log(await work(), log.join(">"));
