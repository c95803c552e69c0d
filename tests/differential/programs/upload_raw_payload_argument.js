// The host call's second argument directly: a string, a Uint8Array, and values refused.
const env = JSON.stringify({ method: "POST", route: "/v1/imports", values: [], type: "text/csv" });
const ok = await __coderunner_host_start(env, "a,b\n1,2\n");
console.log(ok.status, ok.body);
const bytes = await __coderunner_host_start(env, new Uint8Array([104, 44, 105, 10]));
console.log(bytes.status, bytes.body);
for (const bad of [null, 5, new ArrayBuffer(2), new Uint16Array(2), { length: 1 }, [1]]) {
  const r = await __coderunner_host_start(env, bad);
  console.log(r.status, JSON.stringify(r.body), r.type, "headers" in r);
}
const none = await __coderunner_host_start(env, undefined);
console.log(none.status);
const raw = await __coderunner_host_start(JSON.stringify({ method: "GET", path: "/v1/stats" }), "x");
console.log(raw.status, JSON.stringify(raw.body));
