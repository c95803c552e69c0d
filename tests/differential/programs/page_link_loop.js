// Follow rel="next" in the Link header until there is none.
function nextPage(link) {
  for (const part of (link || "").split(",")) {
    const m = part.match(/<([^>]+)>;\s*rel="next"/);
    if (m) return Number(new RegExp("[?&]page=(\\d+)").exec(m[1])[1]);
  }
  return null;
}
let page = 1, total = 0, pages = 0;
while (page !== null) {
  const r = await shop.$response.listItems({ page, limit: 4 });
  total += r.body.items.length;
  pages++;
  page = nextPage(r.headers.link);
}
console.log(pages, total);
