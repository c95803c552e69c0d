const c = new Uint8ClampedArray([300, -5, 127.5, 128.5]);
await shop.getStats();
console.log(c.join(","));
