// The same walk in a fresh sandbox: every bug now carries the bot's comment.
const OWNER = "acme", REPO = "widgets";
const MARK = "<!-- triage-bot -->";
let pages = 0, fresh = 0, seen = 0;
for (let page = 1; page; pages++) {
  const reply = await gh.$response.issues_list_for_repo(OWNER, REPO,
    {state: "open", labels: "bug", per_page: 2, page});
  for (const issue of reply.body) {
    const comments = await gh.issues_list_comments(OWNER, REPO, issue.number);
    if (comments.some((c) => c.body.includes(MARK))) seen++; else fresh++;
  }
  const next = /<[^>]*[?&]page=(\d+)[^>]*>;\s*rel="next"/.exec(reply.headers.link || "");
  page = next ? Number(next[1]) : 0;
}
console.log(`${pages} pages, ${seen} bugs already triaged, ${fresh} new`);
