"""Request targets the broker must refuse against allow `GET /v1/items/*` (and `/v1/items/x`).

REFERENCE is the denial list of the reference; ADVERSARIAL adds encodings, double
encodings, case tricks, look-alikes, CRLF and header injection, overlong paths and
wildcard smuggling. Every entry would reach an allowed route if decoded, folded or
normalised by a lax checker, which is why each one is a useful probe.
"""

from __future__ import annotations

ALLOW = ("GET /v1/items/*", "POST /v1/items/x/run")

REFERENCE = [
    "/v1/items/x?admin=1",
    "/v1/items/x#fragment",
    "/v1/items/%78",
    "/v1/items/%2e%2e",
    "/v1/items/../admin",
    "/v1/items//x",
    "/v1/items/a\\b",
    "/v1/items/has space",
    "/v1/items/café",
    "/v1/items/[x]",
]

ADVERSARIAL = [
    # percent-encoding in every position, single and double
    "/v1/items/%41",
    "/v1/%69tems/x",
    "/%761/items/x",
    "/v1/items/x%2f..%2fadmin",
    "/v1/items/%252e%252e",
    "/v1/items/%25",
    "/v1/items/x%00",
    "/v1/items/x%0d%0aHost:%20evil",
    "/v1/items%2fx",
    "/v1/items/%u002e",
    "/v1/items/%",
    # query / fragment / empty variants
    "/v1/items/x?",
    "/v1/items/x#",
    "/v1/items/?x",
    "",
    "v1/items/x",
    "*",
    "http://evil.example/v1/items/x",
    "//evil.example/v1/items/x",
    "https:/v1/items/x",
    # dots and traversal
    "/v1/items/.",
    "/v1/items/..",
    "/v1/items/...",
    "/v1/items/....",
    "/v1/items/x/..",
    "/v1/./items/x",
    "/v1/items/./x",
    "/v1/items/..;/x",
    "/v1/items/x;",
    "/v1/items/x;jsessionid=1",
    "/v1/items/;x",
    # slashes
    "/v1/items/x/",
    "/v1/items/",
    "/v1//items/x",
    "//v1/items/x",
    "/v1/items\\x",
    "/v1/items/x\\",
    # control characters, CRLF, header injection
    "/v1/items/x\r\nAuthorization: Bearer stolen",
    "/v1/items/x\nHost: evil",
    "/v1/items/x\r",
    "/v1/items/x\t",
    "/v1/items/x\x00",
    "/v1/items/x\x7f",
    "/v1/items/x\x85",
    "/v1/items/\u2028x",
    " /v1/items/x",
    "/v1/items/x ",
    # case tricks (paths are case-sensitive)
    "/V1/items/x",
    "/v1/ITEMS/x",
    "/v1/Items/x",
    # Unicode look-alikes and invisible characters
    "/v1/іtems/x",  # Cyrillic i
    "/v1/items/ｘ",  # fullwidth x
    "/v1/items/x\u200b",  # zero-width space
    "/v1/items/x\ufeff",  # BOM
    "\uff0fv1/items/x",  # fullwidth solidus
    "/v1/items\u2215x",  # division slash
    "/v1/items/\u0078\u0301",  # combining accent
    "/v1/items/x\udcff",  # lone surrogate
    # characters a wildcard must not match
    "/v1/items/a:setIamPolicy",
    "/v1/items/$batch",
    "/v1/items/a@b",
    "/v1/items/a+b",
    "/v1/items/a=b",
    "/v1/items/a,b",
    "/v1/items/a&b",
    "/v1/items/*",
    "/v1/items/a!",
    "/v1/items/'x'",
    "/v1/items/(x)",
    "/v1/items/{x}",
    "/v1/items/a|b",
    "/v1/items/a^b",
    "/v1/items/`x`",
    '/v1/items/"x"',
    "/v1/items/<x>",
    # segment count
    "/v1/items",
    "/v1/items/x/y",
    "/v1/items/x/run",
    "/v1/items/x/run/more",
    "/",
    # very long
    "/v1/items/" + "a" * 100_000 + "/x",
    "/v1/items/x" + "/.." * 5000,
    "/" + "/".join(["v1"] * 10_000),
]

#: Methods that must not pass, against an allow list holding GET and POST entries.
BAD_METHODS = [
    "HEAD",
    "OPTIONS",
    "TRACE",
    "CONNECT",
    "PUT",
    "DELETE",
    "PATCH",
    "GET ",
    " GET",
    "G ET",
    "GET\r\n",
    "GET\x00",
    "GE",
    "GETS",
    "",
    "ＧＥＴ",  # fullwidth
    "poſt",  # long s: "poſt".upper() == "POST"
    "ǵet",
    "get\u200b",
]
