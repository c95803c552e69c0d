"""What every example shares, so each example folder keeps only what is its own.

An example is a fake API (its answers), a grants file, a few agent scripts, the claims
its page makes and the page's words. Serving the fake on loopback, doing the runs
through the real grant/broker/sandbox, checking the claims that hold for every example,
the page's common figures and the `python -m examples.NAME [--check]` command are the
same for all of them and live here:

    loopback.py  the fake's HTTP server, request log and standalone `serve` command
    runs.py      the runs, recorded layer by layer (trace rows, requests, audit)
    claims.py    the claims every page makes (printed lines, refusals, key never seen)
    page.py      the page's Jinja2 environment and headline figures
    command.py   regenerate or `--check` an example's files and page
"""
