const arr = [];
await shop.getStats();
Object.assign(arr, ["x", "y"]);
console.log(arr.length, arr.join());
