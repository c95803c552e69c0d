const stats = await shop.getStats();
const rows = Object.entries(stats.by_tag).map(([k, v]) => `| ${k.padEnd(6)} | ${String(v).padStart(3)} |`);
console.log(["| tag    |   n |", ...rows].join("\n"));
