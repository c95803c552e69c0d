const result = {};
const stats = await shop.getStats();
Object.assign(result, stats.by_tag, { total: stats.count });
console.log(JSON.stringify(result));
