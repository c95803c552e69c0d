// The blocking host call's reply object: the same properties as a started call's.
const a = __coderunner_host_call(JSON.stringify({ method: "GET", path: "/v1/items/a1" }));
console.log(JSON.stringify(Object.getOwnPropertyNames(a)), a.type, a.headers);
const b = __coderunner_host_call(JSON.stringify({ method: "GET", path: "/v1/downloads/all" }));
console.log(b.body instanceof Uint8Array, b.body.length, b.type, b.body[255]);
const c = __coderunner_host_call(JSON.stringify({ method: "GET", path: "/v1/nope" }));
console.log(c.status, JSON.stringify(Object.getOwnPropertyNames(c)), c.type);
const d = __coderunner_host_call(JSON.stringify({ method: "GET", path: "/v1/notes/x" }), 42);
console.log(d.status, d.body.trim());
