const stats = await shop.getStats();
for (const [tag, n] of Object.entries(stats.by_tag)) console.log(`${tag}=${n}`);
