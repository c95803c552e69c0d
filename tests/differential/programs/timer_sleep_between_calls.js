import * as os from "qjs:os";
const sleep = (ms) => new Promise((r) => os.setTimeout(r, ms));
const out = [];
for (const id of ["t1", "t2"]) { out.push((await shop.getItem(id)).id); await sleep(5); }
console.log(out.join(","));
