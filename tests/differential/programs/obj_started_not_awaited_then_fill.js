const out = {};
const p = shop.getItem("s1");
out.before = 1;
const it = await p;
out.after = it.id;
console.log(JSON.stringify(out));
