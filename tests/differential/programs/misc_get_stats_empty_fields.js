const s = await shop.getStats();
s.empty.filled = 1;
const fresh = {};
console.log(JSON.stringify(s.empty), JSON.stringify(s.none), JSON.stringify(fresh));
