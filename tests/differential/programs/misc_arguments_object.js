function f() { return Array.prototype.slice.call(arguments).join("-"); }
const it = await shop.getItem("ao");
console.log(f(it.id, it.stock, 3), (function () { return arguments.length; })(1, 2));
