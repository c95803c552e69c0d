import * as os from "qjs:os";
await os.sleepAsync(5);
const it = await shop.getItem("sa");
console.log(it.id);
