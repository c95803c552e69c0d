const r = __coderunner_host_call(JSON.stringify({ method: "POST", path: "/v1/admin/reset", body: {} }));
console.log(r.status, r.body.slice(0, 20));
