"""What the guest prints reaches stdout as node would write it: a lone surrogate is one U+FFFD.

QuickJS writes a lone surrogate as its three WTF-8 bytes (ED A0 80 for U+D800), which
UTF-8 forbids; decoded with "replace" they were three U+FFFD, where node (and any UTF-8
encoder: TextEncoder, `String.prototype.toWellFormed`) writes one. The differential
suite found it (tests/differential/programs/str_print_lone_surrogate.js).
"""

from __future__ import annotations

import pytest

from runtime import run_sandbox as run
from runtime.sandbox.runner import output_text


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ('console.log("a\\ud800b")', "a\ufffdb\n"),
        ('console.log("\\udc00", "\\ud83d\\ude00", "\\ud83d")', "\ufffd \U0001f600 \ufffd\n"),
        ('console.log("\\ud800\\ud800")', "\ufffd\ufffd\n"),
        ('console.log("é✓")', "é✓\n"),
    ],
)
def test_a_printed_lone_surrogate_is_one_replacement_character(code, expected):
    r = run(code)
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout == expected


def test_bytes_that_are_not_utf8_are_replaced_as_the_standard_says():
    # Table 3-8 of the Unicode standard (section 3.9): one U+FFFD per maximal subpart.
    raw = bytes.fromhex("61 F1 80 80 E1 80 C2 62 80 63 80 BF 64")
    assert output_text(raw) == "a\ufffd\ufffd\ufffdb\ufffdc\ufffd\ufffdd"
    # An encoded surrogate cut short is not a lone surrogate's three bytes.
    assert output_text(b"x\xed\xa0") == "x\ufffd\ufffd"
    assert output_text(b"\xed\x9f\xbf") == "\ud7ff"
