const a = 10n, b = 10;
await shop.getItem("bc");
console.log(a == b, a === b, a > 9, typeof (a + 1n), [3n, 1n, 2n].sort().join(","));
