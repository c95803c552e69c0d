import * as os from "qjs:os";
os.setTimeout(async () => { const it = await shop.getItem("late"); console.log("late", it.id); }, 5);
console.log("module done");
