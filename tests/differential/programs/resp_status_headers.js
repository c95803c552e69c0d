// $response: status, headers and body of a 200, and which headers the grant lets through.
const r = await shop.$response.listItems({ limit: 2 });
console.log(r.status, Object.keys(r).join());
console.log(Object.keys(r.headers).sort().join());
console.log(r.headers["x-total-count"], "x-internal-trace" in r.headers);
console.log(r.body.items.length, r.body.page);
