const r = __coderunner_host_call('{"method":"GET","path":"/v1/items/a\ud800"}');
console.log(r.status, JSON.stringify(r.body));
const s = __coderunner_host_call(JSON.stringify({ method: "GET", path: "/v1/items/b\ud800" }));
console.log(s.status, JSON.stringify(s.body).slice(0, 30));
