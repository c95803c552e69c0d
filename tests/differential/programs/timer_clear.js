import * as os from "qjs:os";
const log = [];
const t = os.setTimeout(() => log.push("never"), 5);
os.clearTimeout(t);
await new Promise((r) => os.setTimeout(r, 10));
console.log(JSON.stringify(log));
