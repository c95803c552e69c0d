const r = __coderunner_host_call(JSON.stringify({ method: "GET", path: "/v1/items/blk" }));
const body = JSON.parse(r.body);
console.log(r.status, typeof r.body, Object.keys(r).join(), body.id);
