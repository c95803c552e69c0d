"""The key never enters the sandbox: not in linear memory, globals, source or output.

Each search is shown to work by planting the secret where a careless operator could (a
preamble) and finding it with the very same search.
"""

from __future__ import annotations

from runtime import GuestGrant, HostReply, HostRequest
from runtime import run_sandbox as run
from specgen.routes import Route

SECRET = "sk-live-" + "7f3a9c" * 6
ALLOW = (Route("/v1/items/*", "GET"),)

#: Uses the API like agent code would; never spells the secret itself, so any copy of it
#: in linear memory could only have come from outside.
CALLER = """
var item = await host.get("/v1/items/a");
console.log("item " + item.name + " " + JSON.stringify(Object.keys(host)));
"""

#: Looks for the secret from inside (it has to build the needle, so its memory is not
#: searched: the needle itself would be found there).
SEARCHER = """
var needle = ["sk", "live", "7f3a9c".repeat(6)].join("-");
function holds(v) { try { return String(v).indexOf(needle) >= 0; } catch (e) { return false; } }
var item = await host.get("/v1/items/a");
var inGlobals = Object.getOwnPropertyNames(globalThis).filter(function (n) { return holds(globalThis[n]); });
var inClient = Object.keys(host).filter(function (k) { return holds(host[k]); });
console.log("item " + item.name);
console.log("globals holding the key: " + (inGlobals.length ? inGlobals.join(",") : "none"));
console.log("client functions holding the key: " + (inClient.length ? inClient.join(",") : "none"));
"""


class SecretHoldingBroker:
    """Holds the key the way the real broker does: host side, only used upstream."""

    def __init__(self, secret: str) -> None:
        self._authorization = f"Bearer {secret}"
        self.calls = 0

    def __call__(self, request: HostRequest) -> HostReply:
        self.calls += 1
        assert self._authorization.startswith("Bearer ")
        return HostReply(200, b'{"name": "widget"}', "application/json")


def hits(secret: str, blob: bytes) -> int:
    return sum(blob.count(secret.encode(enc)) for enc in ("utf-8", "utf-16-le"))


def run_and_search(code: str, preamble: str = ""):
    snapshots: list[bytes] = []
    broker = SecretHoldingBroker(SECRET)
    result = run(
        code,
        grant=GuestGrant(allow=ALLOW, preamble=preamble),
        handler=broker,
        memory_probe=snapshots.append,
    )
    assert result.exit_code == 0, result.stderr
    assert broker.calls == 1 and len(snapshots) == 1
    return result, snapshots[0]


def test_secret_is_nowhere_in_linear_memory_or_output():
    result, memory = run_and_search(CALLER)
    assert len(memory) >= 19 * 65536  # the whole linear memory, stack region included
    assert hits(SECRET, memory) == 0
    assert SECRET not in result.stdout + result.stderr
    assert result.stdout == 'item widget ["call","get","put","post","patch","del"]\n'


def test_secret_is_in_no_global_or_client_function():
    result, _ = run_and_search(SEARCHER)
    assert SECRET not in result.stdout + result.stderr
    assert (
        result.stdout
        == "item widget\nglobals holding the key: none\nclient functions holding the key: none\n"
    )


def test_the_same_searches_find_a_secret_planted_in_a_preamble():
    planted = f'globalThis.planted = "{SECRET}";'
    _, memory = run_and_search(CALLER, preamble=planted)
    assert hits(SECRET, memory) > 0
    result, _ = run_and_search(SEARCHER, preamble=planted)
    assert "globals holding the key: execArgv,planted\n" in result.stdout


def test_the_memory_search_finds_a_secret_that_only_passed_through_a_reply():
    """A reply is copied into guest memory: a broker that leaked the key would be caught."""
    snapshots: list[bytes] = []
    leaky = lambda request: HostReply(200, ('{"name": "' + SECRET + '"}').encode())  # noqa: E731
    run(
        'globalThis.kept = await host.get("/v1/items/a")',  # kept alive, as a leak would be
        grant=GuestGrant(allow=ALLOW),
        handler=leaky,
        memory_probe=snapshots.append,
    )
    assert hits(SECRET, snapshots[0]) > 0
