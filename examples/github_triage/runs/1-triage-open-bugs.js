// Walk every page of open bugs by following Link rel="next", and comment once on each.
const OWNER = "acme", REPO = "widgets";
const MARK = "<!-- triage-bot -->";

// GitHub's Link names the next page by a URL of its own (by repository ID); the page
// number is what carries over to the next call.
function nextPage(link) {
  for (const part of (link || "").split(",")) {
    const found = /<[^>]*[?&]page=(\d+)[^>]*>;\s*rel="next"/.exec(part);
    if (found) return Number(found[1]);
  }
  return 0;
}

const bugs = [];
for (let page = 1; page; ) {
  const reply = await gh.$response.issues_list_for_repo(OWNER, REPO,
    {state: "open", labels: "bug", per_page: 2, page});
  console.log(`page ${page}: ${reply.body.map((i) => "#" + i.number).join(" ")}` +
    ` (${reply.headers["x-ratelimit-remaining"]} calls left this hour)`);
  if (page === 1) console.log(`headers the code can read: ${Object.keys(reply.headers).sort().join(", ")}`);
  bugs.push(...reply.body);
  page = nextPage(reply.headers.link);
}

for (const issue of bugs) {
  const comments = await gh.issues_list_comments(OWNER, REPO, issue.number, {per_page: 100});
  if (comments.some((c) => c.body.includes(MARK))) {
    console.log(`#${issue.number} ${issue.title}: already triaged`);
    continue;
  }
  const made = await gh.$response.issues_create_comment(OWNER, REPO, issue.number,
    {body: `${MARK}\nThanks for the report. Triage will look at it this week.`});
  const labels = await gh.issues_add_labels(OWNER, REPO, issue.number, {labels: ["triaged"]});
  console.log(`#${issue.number} ${issue.title}: commented (${made.status}), ` +
    `labels ${labels.map((l) => l.name).join(", ")}`);
}
