"""A truncated envelope is a 400 refusal, never an exception, wherever it is cut.

The scanner in runtime/sandbox/envelope.py walks the guest's bytes by index; a bound check off by
one (`i < len(s)` -> `i <= len(s)`) would raise IndexError out of the host call instead of
refusing. Every prefix of a valid envelope, with and without a body, is checked by the
decoder itself and end to end through the sandbox and the real broker, whose run still
ends with its audit record.
"""

from __future__ import annotations

import json

import pytest

from runtime import HostRequest as Envelope
from runtime import run_with_grant
from runtime.sandbox.envelope import (
    STATUS_INVALID,
    STATUS_TOO_LARGE,
    TEXT_INVALID,
    TEXT_TOO_LARGE,
    EnvelopeRefusal,
    decode,
)
from tests.runtime.loopback import FakeAPI, profile

KEY = "sk-prefix-" + "9e" * 12
VALID = [
    '{"method":"GET","path":"/v1/items/1"}',
    '{"method":"POST","path":"/v1/items/1","body":{"a":[1,-2.5e3,"x\\u00e9\\"",null,true,{}]}}',
    '{ "Method" : "GET" ,\n "PATH":"/v1/items/1", "body" : "" }',
    '{"body":null,"method":"PUT","path":"/v1/items/1"}',
    ' \t\r\n{"method":"GET","path":"/v1/items/1"}',  # its first prefixes are only whitespace
    # longer than 256 characters, where `i is not len(s)` and `i != len(s)` part ways
    '{"method":"GET","path":"/v1/items/' + "a" * 300 + '"}',
    # and with keys, ',' and ':' after character 256, where `i >= len(s)` -> `i is len(s)`
    # (a key or a ':' expected at the very end) would index past the end
    '{"path":"/v1/items/' + "a" * 300 + '" , "method" : "GET" }',
    # and whitespace past character 256 before the "{" or right after it, where
    # `i >= len(s)` -> `i is len(s)` and `i < len(s)` -> `i is not len(s)` part ways
    " " * 300 + '{"method":"GET","path":"/v1/items/1"}',
    "{" + " " * 300 + '"method":"GET","path":"/v1/items/1"}',
]


@pytest.mark.parametrize("envelope", VALID)
def test_the_whole_envelope_decodes(envelope: str) -> None:
    assert isinstance(decode(envelope.encode()), Envelope)


@pytest.mark.parametrize("envelope", VALID)
def test_every_prefix_is_a_400_refusal(envelope: str) -> None:
    raw = envelope.encode()
    assert decode(raw[:0]) == EnvelopeRefusal(STATUS_TOO_LARGE, TEXT_TOO_LARGE)
    for n in range(1, len(raw)):
        assert decode(raw[:n]) == EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID), raw[:n]


@pytest.mark.parametrize("envelope", VALID)
def test_every_prefix_is_refused_through_the_broker_and_the_run_is_audited(
    envelope: str, api: FakeAPI
) -> None:
    # The guest sends each prefix through the raw host function, then one valid call.
    code = (
        f"const whole = {json.dumps(envelope)};\n"
        "const seen = [];\n"
        "for (let n = 0; n < whole.length; n++) {\n"
        "  const r = __coderunner_host_call(whole.slice(0, n));\n"
        "  seen.push(r.status + ' ' + r.body);\n"
        "}\n"
        "print(JSON.stringify(seen));\n"
        'const ok = __coderunner_host_call(JSON.stringify({method: "GET", path: "/v1/items/1"}));\n'
        "print(ok.status);\n"
    )
    grant = profile(api.url, KEY, ("GET /v1/items/*",), name="prefixes")
    outcome = run_with_grant(code, grant)
    assert (outcome.result.exit_code, outcome.result.stderr) == (0, ""), outcome.result.stderr
    seen_line, final = outcome.result.stdout.splitlines()
    seen = json.loads(seen_line)
    assert seen[0] == f"{STATUS_TOO_LARGE} {TEXT_TOO_LARGE}"
    assert seen[1:] == [f"{STATUS_INVALID} {TEXT_INVALID}"] * (len(envelope) - 1)
    assert final == "200"
    assert [s.path for s in api.requests] == ["/v1/items/1"]  # no prefix reached the API
    audit = json.loads(outcome.audit)
    assert audit["profile"] == "prefixes"
    assert [(c["method"], c["route"]) for c in audit["calls"]] == [("GET", "/v1/items/*")]
    assert KEY not in outcome.audit and KEY not in outcome.result.stdout


def test_a_body_with_an_integer_too_long_for_python_is_forwarded_byte_for_byte() -> None:
    # The body is scanned for its span with a decoder that does not convert numbers; the
    # method and path decoder would refuse a 5000-digit integer (kills swapping the two).
    body = '{"n":' + "7" * 5000 + "}"
    decoded = decode(f'{{"method":"POST","path":"/v1/items/1","body":{body}}}'.encode())
    assert decoded == Envelope("POST", "/v1/items/1", body.encode())
    refused = decode(('{"method":' + "7" * 5000 + ',"path":"/v1/items/1"}').encode())
    assert refused == EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)


@pytest.mark.parametrize(
    "raw",
    [
        '[{"method":"GET","path":"/a"}',  # not an object: kills `s[i] != "{"` -> `>`
        'x"method":"GET","path":"/a"}',
        '{!method":"GET","path":"/a"}',  # a key must start with '"': kills `!= '"'` -> `>`
        '{ method":"GET","path":"/a"}',
        '{"method":"GET","path":"/a"~',  # only "}" closes: kills `== "}"` -> `>=`
        '{"method":"GET","path":"/a"\u00e9',
        '{"method":"GET","path":"/a"|',
    ],
)
def test_a_wrong_delimiter_is_refused(raw: str) -> None:
    assert decode(raw.encode()) == EnvelopeRefusal(STATUS_INVALID, TEXT_INVALID)
