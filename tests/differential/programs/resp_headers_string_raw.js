// The raw reply's headers are one JSON string of lower-case names; parse and use them.
const r = await __coderunner_host_start(JSON.stringify({ method: "GET", route: "/v1/items", values: [], query: { limit: 2 } }));
console.log(typeof r.headers, r.headers.length > 10);
const h = JSON.parse(r.headers);
console.log(Object.keys(h).sort().join(), Object.keys(h).every((k) => k === k.toLowerCase()));
console.log(h.link.split(", ").length, h["x-total-count"]);
r.type = "changed";
r.headers = null;
console.log(r.type, r.headers, delete r.type, "type" in r);
