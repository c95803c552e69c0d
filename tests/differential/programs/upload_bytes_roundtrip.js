// Download bytes and upload them again, whole and in chunks, concurrently.
const data = await shop.download("n-1000");
const chunks = [];
for (let i = 0; i < data.length; i += 256) chunks.push(data.subarray(i, i + 256));
const results = await Promise.all([shop.putBlob("whole", data), ...chunks.map((c, i) => shop.putBlob(`c${i}`, c))]);
console.log(results.map((r) => `${r.id}:${r.received}:${r.sum}`).join(" "));
