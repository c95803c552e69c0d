const calls = [];
const api = new Proxy(shop, { get(t, k) { calls.push(String(k)); return t[k]; } });
await api.getItem("px");
await api.getStats();
console.log(calls.join(","));
