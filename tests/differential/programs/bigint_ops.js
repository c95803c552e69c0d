const it = await shop.getItem("bo");
const n = BigInt(it.stock + 3);
console.log(n ** 5n, n % 2n, -n / 2n, n << 3n, BigInt.asUintN(8, 257n), (n * 123456789123456789n).toString(36));
