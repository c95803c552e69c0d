const o = {};
await shop.getItem("p");
Object.defineProperty(o, "hidden", { value: 1, enumerable: false });
o.shown = 2;
console.log(JSON.stringify(o), o.hidden);
