// The raw call in its $response form, and the reply object of the host call itself.
const r = await shop.$response.get("/v1/stats");
console.log(r.status, JSON.stringify(r.headers), r.body.count);
const raw = await __coderunner_host_start(JSON.stringify({ method: "GET", path: "/v1/stats" }));
console.log(JSON.stringify(Object.keys(raw)), JSON.stringify(Object.getOwnPropertyNames(raw)));
console.log(raw.type, typeof raw.headers, Object.getOwnPropertyDescriptor(raw, "type").enumerable);
const denied = await __coderunner_host_start(JSON.stringify({ method: "GET", path: "/v1/admin" }));
console.log(denied.status, "headers" in denied, denied.type, JSON.stringify(denied));
