const it = await shop.getItem("rf");
console.log(JSON.stringify(it, (k, v) => (v === null || (typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0) ? undefined : v)));
