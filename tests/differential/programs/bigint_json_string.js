const big = 2n ** 70n;
const r = await shop.createItem({ big: big.toString(), small: Number(42n) });
console.log(JSON.stringify(r.created), BigInt(r.created.big) === big);
