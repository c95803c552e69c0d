const it = await shop.getItem("du");
const d = new Date(it.meta.created + "T00:00:00Z");
console.log(d.toISOString(), d.getUTCDay(), d.getTime(), new Date(Date.UTC(2026, 1, 29)).toISOString());
