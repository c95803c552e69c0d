import * as os from "qjs:os";
const log = [];
os.setTimeout(() => log.push("b"), 20);
os.setTimeout(() => log.push("a"), 10);
await new Promise((r) => os.setTimeout(r, 30));
console.log(log.join(""));
