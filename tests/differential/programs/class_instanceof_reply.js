const it = await shop.getItem("io");
console.log(it instanceof Object, Array.isArray(it.tags), Object.getPrototypeOf(it) === Object.prototype);
