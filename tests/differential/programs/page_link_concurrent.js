// Read the first page, then fetch the rest concurrently, counted from X-Total-Count.
const first = await shop.$response.listItems({ limit: 5 });
const total = Number(first.headers["x-total-count"]);
const pages = Math.ceil(total / 5);
const rest = await Promise.all(
  Array.from({ length: pages - 1 }, (_, i) => shop.$response.listItems({ page: i + 2, limit: 5 })),
);
const all = [first, ...rest];
console.log(pages, all.map((r) => r.body.items.length).join(), all.map((r) => r.status).join());
console.log(all.filter((r) => (r.headers.link || "").includes('rel="next"')).length);
