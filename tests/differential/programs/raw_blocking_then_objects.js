const before = {};
const r = __coderunner_host_call(JSON.stringify({ method: "GET", path: "/v1/stats" }));
const after = {};
before.x = 1;
console.log(JSON.stringify(before), JSON.stringify(after), r.status);
