import * as os from "qjs:os";
const sleep = (ms) => new Promise((r) => os.setTimeout(r, ms));
let delay = 1, tries = 0, value;
while (true) {
  tries++;
  try { value = await shop.getItem(tries < 3 ? "boom-b" : "ok-b"); break; } catch { await sleep(delay); delay *= 2; }
}
console.log(tries, delay, value.id);
