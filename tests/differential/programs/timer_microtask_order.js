const log = [];
queueMicrotask(() => log.push("micro"));
Promise.resolve().then(() => log.push("then"));
log.push("sync");
await shop.getStats();
console.log(log.join(","));
