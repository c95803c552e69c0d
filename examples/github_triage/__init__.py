"""The GitHub triage example: agent code triaging one repository's issues through a grant.

A cut of GitHub's REST document, a loopback fake that holds callers to GitHub's rules
(User-Agent, token schemes, Link paging, rate-limit headers, ETag and 304, 201 with
Location), the runs (walk every page of open bugs and comment once on each; the same
walk again; another repository, refused) and the page computed from them.
"""
