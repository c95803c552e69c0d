const env = { toString() { return JSON.stringify({ method: "GET", path: "/v1/items/ts" }); } };
const r = __coderunner_host_call(env);
console.log(r.status, JSON.parse(r.body).id);
