const cache = {};
const it = await shop.getItem("h1");
if (!Object.prototype.hasOwnProperty.call(cache, it.id)) cache[it.id] = it.name;
console.log(JSON.stringify(cache), cache.hasOwnProperty("status"));
