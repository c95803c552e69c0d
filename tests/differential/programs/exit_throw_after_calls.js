const it = await shop.getItem("tac");
console.log(it.id);
if (it.id) throw new RangeError("stop here");
