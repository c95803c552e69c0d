const stats = await shop.getStats();
console.log(JSON.stringify(stats, null, 2));
