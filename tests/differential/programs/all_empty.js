const r = await Promise.all([]);
const s = await Promise.allSettled([]);
console.log(JSON.stringify(r), JSON.stringify(s));
