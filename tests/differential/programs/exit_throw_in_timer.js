import * as os from "qjs:os";
const it = await shop.getItem("tt");
console.log("got", it.id);
os.setTimeout(() => { throw new Error("from a timer"); }, 1);
