const p = __coderunner_host_start(JSON.stringify({ method: "GET", path: "/v1/items/st" }));
console.log(p instanceof Promise);
const r = await p;
console.log(r.status, JSON.parse(r.body).id, Object.keys(r).join());
