console.log(JSON.stringify({ n: NaN, i: Infinity, u: undefined, f() {}, d: new Date(0), s: Symbol("x") }));
const it = await shop.getItem("sp");
console.log(JSON.stringify([NaN, undefined, () => 1]));
