const s = "price: $42, cost: $7";
await shop.getStats();
console.log(s.match(/(?<=\$)\d+/g).join("+"));
