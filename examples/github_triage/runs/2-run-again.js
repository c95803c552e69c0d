// The same walk in a fresh sandbox: every bug now carries the bot's comment. Then the
// code asks whether any page changed since, sending each page's ETag as If-None-Match.
const OWNER = "acme", REPO = "widgets";
const MARK = "<!-- triage-bot -->";
const BUGS = {state: "open", labels: "bug", per_page: 2};
let pages = 0, fresh = 0, seen = 0;
const etags = new Map();
for (let page = 1; page; pages++) {
  const reply = await gh.$response.issues_list_for_repo(OWNER, REPO, {...BUGS, page});
  etags.set(page, reply.headers.etag);
  for (const issue of reply.body) {
    const comments = await gh.issues_list_comments(OWNER, REPO, issue.number);
    if (comments.some((c) => c.body.includes(MARK))) seen++; else fresh++;
  }
  const next = /<[^>]*[?&]page=(\d+)[^>]*>;\s*rel="next"/.exec(reply.headers.link || "");
  page = next ? Number(next[1]) : 0;
}
console.log(`${pages} pages, ${seen} bugs already triaged, ${fresh} new`);

// GitHub's document declares no If-None-Match; it is HTTP's own (RFC 9110), so the grant
// lists it and the code names it in a call of its own. A 304 has no body and costs no
// rate limit: the count of calls left stays where it was.
const LIST = {method: "GET", route: "/repos/*/*/issues",
              query: ["state", "labels", "per_page", "page"], headers: ["If-None-Match"]};
for (const [page, etag] of etags) {
  const again = await gh.$response.call(LIST, [OWNER, REPO], undefined,
    {...BUGS, page, "If-None-Match": etag});
  console.log(`page ${page} again: ${again.status}` +
    (again.status === 304 ? " Not Modified" : "") +
    ` (${again.headers["x-ratelimit-remaining"]} calls left)`);
}
