const it = await shop.getItem("tc");
await Promise.resolve(it).then((x) => { throw new TypeError("chain " + x.id); });
console.log("never");
