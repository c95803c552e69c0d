class Money { constructor(c) { this.cents = c; } toJSON() { return (this.cents / 100).toFixed(2); } }
const r = await shop.createItem({ price: new Money(1999), list: [new Money(5)] });
console.log(JSON.stringify(r.created));
