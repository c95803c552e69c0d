// A text body with a lone surrogate: what the host reads from the string.
const r = await shop.$response.importCsv("a,b\n\uD800,x\n");
console.log(r.status, JSON.stringify(r.body));
