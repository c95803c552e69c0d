for (let i = 0; i < 5; i++) await shop.getItem("n" + i);
const fresh = {};
console.log(JSON.stringify(fresh), Object.keys({}).length);
