"""A reply body that is not valid UTF-8 reaches the guest as the Unicode standard decodes it.

The standard's practice (Unicode 15, section 3.9, "U+FFFD Substitution of Maximal
Subparts", Table 3-8), which TextDecoder and fetch's `Response.text()` follow: one U+FFFD
per maximal ill-formed subpart. QuickJS's JS_NewStringLen, which the bridge hands the
bytes to, made a lone surrogate of an encoded surrogate and one U+FFFD per byte of a
truncated sequence; the differential suite found it (tests/differential).
"""

from __future__ import annotations

import pytest

from runtime import GuestGrant, HostReply, HostRequest
from runtime import run_sandbox as run
from specgen.routes import parse_route_line

CALL = 'const r = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/t"}));'
START = 'const r = await __coderunner_host_start(JSON.stringify({method: "GET", path: "/v1/t"}));'
SHOW = 'console.log([...r.body].map((c) => c.codePointAt(0).toString(16)).join(" "));'

CASES = [
    # Table 3-8 of the standard, byte for byte, and the code points it lists.
    (
        bytes.fromhex("61 F1 80 80 E1 80 C2 62 80 63 80 BF 64"),
        "61 fffd fffd fffd 62 fffd 63 fffd fffd 64",
    ),
    # An encoded surrogate: ED may only be followed by 80..9F, so each byte is a subpart.
    (bytes.fromhex("ED A0 80"), "fffd fffd fffd"),
    # A truncated four-byte sequence is one maximal subpart.
    (bytes.fromhex("F0 9F 98 20"), "fffd 20"),
    # Valid UTF-8 is passed on as it is.
    ("é✓😀".encode(), "e9 2713 1f600"),
]


@pytest.mark.parametrize("how", [CALL, START], ids=["blocking", "started"])
@pytest.mark.parametrize(("body", "code_points"), CASES)
def test_reply_text_is_decoded_as_the_standard_says(how, body, code_points):
    def reply(_request: HostRequest) -> HostReply:
        return HostReply(200, body, "text/plain")

    grant = GuestGrant(allow=(parse_route_line("GET /v1/t"),))
    r = run(how + SHOW, grant=grant, handler=reply)
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout.strip() == code_points
