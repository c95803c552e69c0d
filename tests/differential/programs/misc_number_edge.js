const it = await shop.getItem("ne");
console.log(0.1 * 3, 1 / 3, 2 ** 53 + 1, -0 === 0, Object.is(-0, 0), Number.MAX_SAFE_INTEGER, Number.EPSILON > 0, (123.456).toFixed(10), 1e300 * 1e10, Math.round(-0.5), Math.round(2.5));
