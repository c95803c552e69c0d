const words = ["banana", "Apple", "cherry", "apple"];
await shop.getStats();
const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
console.log([...words].sort().join(","), [...words].sort((a, b) => cmp(a.toLowerCase(), b.toLowerCase()) || cmp(a, b)).join(","));
