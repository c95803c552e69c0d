const ids = ["ok", "missing-1", "ok2", "boom-2", "missing-3"];
const rs = await Promise.allSettled(ids.map((id) => shop.getItem(id)));
const tally = {};
for (const r of rs) {
  const key = r.status === "fulfilled" ? "ok" : r.reason.message.match(/host api (\d+)/)[1];
  tally[key] = (tally[key] || 0) + 1;
}
console.log(JSON.stringify(tally));
