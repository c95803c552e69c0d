import * as os from "qjs:os";
const p = shop.getItem("missing-after-timer");
await new Promise((r) => os.setTimeout(r, 5));
await shop.getStats();
try { await p; } catch (e) { console.log("caught late", e.message.slice(0, 12)); }
