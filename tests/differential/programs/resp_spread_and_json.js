// Spreading or serialising a reply object shows only its enumerable properties.
const raw = await __coderunner_host_start(JSON.stringify({ method: "GET", path: "/v1/stats" }));
const copy = { ...raw };
console.log(Object.keys(copy).join(), copy.type === undefined, raw.type);
const assigned = Object.assign({}, raw);
console.log(JSON.stringify(Object.entries(assigned).map(([k]) => k)));
for (const k in raw) console.log("key", k);
