// Parse every rel of a Link header into an object.
const r = await shop.$response.listItems({ page: 2, limit: 3 });
const rels = {};
for (const part of r.headers.link.split(/,\s*(?=<)/)) {
  const [, url, rel] = part.match(/^<(.*)>;\s*rel="([^"]+)"$/);
  rels[rel] = url.slice(url.indexOf("?"));
}
console.log(JSON.stringify(rels), r.headers["x-total-count"]);
const last = await shop.$response.listItems({ page: 3, limit: 3 });
console.log("next" in last.headers, /rel="next"/.test(last.headers.link), last.body.next);
