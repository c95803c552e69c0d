const tag = Symbol("tag");
const o = { [tag]: "hidden", plain: 1 };
await shop.getItem("sym");
console.log(JSON.stringify(o), o[tag], Object.getOwnPropertySymbols(o).length);
