const stats = await shop.getStats();
console.log((stats.count * 12345.678).toLocaleString(), new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" }).format(stats.count * 1.5));
