const r = __coderunner_host_call("not json");
console.log(r.status, JSON.stringify(r.body));
const s = __coderunner_host_call(JSON.stringify({ method: "GET", path: "/v1/stats", extra: 1 }));
console.log(s.status, JSON.stringify(s.body));
