"""The loopback API both sides of the differential suite call: `api/shop.openapi.json`.

Stateless on purpose: every answer is a function of the request alone, so two runs of
one program get the same answers whatever order their concurrent calls arrive in, and
the only thing that can make the sandbox's output differ from node's is the engine.
Replies hold what models' code trips over in real APIs: empty objects and arrays nested
in bodies, an empty 204, a text/plain body (long ones, and one that is not UTF-8), a 404
and a 500 with JSON error bodies, binary downloads (octet-stream, a PNG), a CSV report
(one with a BOM), an XML echo, a 304 with an ETag, and a list whose `Link` header names
the next page (beside a header the grant does not let through).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.runtime.loopback import FakeAPI, Seen

#: The key the grant's token block sends; the fake refuses anything else with 401.
TOKEN = "shop-fake-key-held-by-the-broker"


def _send(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    ctype: str,
    headers: tuple[tuple[str, str], ...] = (),
) -> None:
    handler.send_response(status)
    if ctype and (body or status not in (204, 304)):
        handler.send_header("Content-Type", ctype)
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _json(
    handler: BaseHTTPRequestHandler,
    status: int,
    value: Any,
    headers: tuple[tuple[str, str], ...] = (),
) -> None:
    body = json.dumps(value, separators=(",", ":")).encode()
    _send(handler, status, body, "application/json", headers)


def _download(file_id: str) -> bytes:
    """A file's bytes: every byte value ("all"), none ("empty"), or n bytes of a pattern."""
    if file_id == "all":
        return bytes(range(256))
    if file_id.startswith("n-"):
        n = min(int(file_id[2:] or 0), 1 << 20)
        return bytes((k * 37 + 11) % 256 for k in range(n))
    return b""


#: The first bytes of a PNG (signature and IHDR), then bytes that are not UTF-8.
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"\xff\xfe\x00"


def _item(item_id: str) -> dict[str, Any]:
    n = sum(ord(c) for c in item_id) % 97
    return {
        "id": item_id,
        "name": f"item {item_id}",
        "price": round(n * 1.25, 2),
        "stock": n % 7,
        "tags": ["red", "sale"] if n % 2 else [],
        "attrs": {} if n % 3 else {"color": "blue", "size": n % 5},
        "meta": {"created": f"2026-01-0{1 + n % 9}", "extra": {}},
        "reviews": [],
        "active": n % 4 != 0,
        "owner": None,
    }


def _body(seen: Seen) -> Any:
    try:
        return json.loads(seen.body) if seen.body else None
    except ValueError:
        return seen.body.decode("utf-8", "replace")


def respond(handler: BaseHTTPRequestHandler, seen: Seen) -> None:
    """Answer one request of the shop API (see the module docstring)."""
    if seen.headers.get("authorization") != f"Bearer {TOKEN}":
        _json(handler, 401, {"error": "unauthorized"})
        return
    url = urlsplit(seen.path)
    query = parse_qsl(url.query, keep_blank_values=True)
    parts = url.path.split("/")[2:]  # after "/v1"
    method = seen.method
    if parts[:1] == ["items"] and len(parts) >= 2:
        item_id = parts[1]
        if item_id.startswith("missing"):
            _json(handler, 404, {"error": "not found", "id": item_id})
            return
        if item_id.startswith("boom"):
            _json(handler, 500, {"error": "internal", "detail": {}})
            return
        if item_id == "empty":
            _json(handler, 200, {})
            return
    match method, parts:
        case "GET", ["items"]:
            page = int(dict(query).get("page") or 1)
            limit = int(dict(query).get("limit") or 3)
            tag = dict(query).get("tag")
            ids = [f"p{page}-{i}" for i in range(min(limit, 20))] if page <= 3 else []
            items = [_item(i) for i in ids]
            if tag:
                items = [i for i in items if tag in i["tags"]]
            nxt = page + 1 if page < 3 else None
            links = [f'<https://shop.example.test/v1/items?page=1&limit={limit}>; rel="first"']
            if nxt:
                links.insert(
                    0, f'<https://shop.example.test/v1/items?page={nxt}&limit={limit}>; rel="next"'
                )
            paging = (("Link", ", ".join(links)), ("X-Total-Count", str(3 * min(limit, 20))))
            body = {"items": items, "page": page, "next": nxt, "facets": {}}
            _json(handler, 200, body, (*paging, ("X-Internal-Trace", "not-for-agents")))
        case "POST", ["items"]:
            body = _body(seen)
            _json(handler, 201, {"id": "new-1", "created": body, "links": {}, "warnings": []})
        case "GET", ["items", item_id]:
            _json(handler, 200, _item(item_id))
        case "PUT" | "PATCH", ["items", item_id]:
            base = _item(item_id)
            patch = _body(seen)
            merged = {**base, **patch} if isinstance(patch, dict) else base
            _json(handler, 200, {"item": merged, "changed": sorted(patch or {}), "method": method})
        case "DELETE", ["items", _]:
            _send(handler, 204, b"", "")
        case "GET", ["items", item_id, "reviews"]:
            order = dict(query).get("sort", "new")
            stars = [5, 3, 4] if order == "new" else [3, 4, 5]
            reviews = [
                {"stars": s, "text": f"review {k} of {item_id}", "by": {}}
                for k, s in enumerate(stars)
            ]
            _json(handler, 200, {"reviews": reviews, "sort": order})
        case "POST", ["items", item_id, "reviews"]:
            _json(handler, 201, {"item": item_id, "review": _body(seen), "ok": True})
        case "GET", ["notes", "badbytes"]:
            # Not UTF-8: the Unicode standard's Table 3-8 bytes, an encoded surrogate and
            # a truncated sequence (what a broken upstream sends).
            raw = bytes.fromhex("61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 20 ED A0 80 20 F0 9F 98 21")
            _send(handler, 200, raw, "text/plain; charset=utf-8")
        case "GET", ["notes", note_id] if note_id.startswith("long-"):
            lines = min(int(note_id[5:] or 0), 50_000)
            text = "".join(f"line {k}: é ✓ 😀\n" for k in range(lines))
            _send(handler, 200, text.encode(), "text/plain; charset=utf-8")
        case "GET", ["notes", note_id]:
            text = f"note {note_id}\nline two: é ✓\n"
            _send(handler, 200, text.encode(), "text/plain; charset=utf-8")
        case "GET", ["downloads", file_id]:
            _send(handler, 200, _download(file_id), "application/octet-stream")
        case "GET", ["images", _]:
            _send(handler, 200, PNG, "image/png")
        case "PUT", ["blobs", blob_id]:
            got = seen.body
            _json(
                handler,
                200,
                {
                    "id": blob_id,
                    "received": len(got),
                    "sum": sum(got) % 65536,
                    "head": list(got[:4]),
                    "kind": seen.headers.get("content-type", ""),
                },
            )
        case "POST", ["imports"]:
            text = seen.body.decode("utf-8", "replace")
            rows = [r for r in text.replace("\r\n", "\n").split("\n") if r]
            _json(
                handler,
                200,
                {
                    "received": len(seen.body),
                    "rows": len(rows),
                    "header": rows[0].split(",") if rows else [],
                    "kind": seen.headers.get("content-type", ""),
                },
            )
        case "POST", ["feeds"]:
            stored = b"<stored bytes='%d'>" % len(seen.body) + seen.body + b"</stored>"
            _send(handler, 200, stored, "application/xml; charset=utf-8")
        case "GET", ["reports", report_id]:
            text = f'id,name,total\r\n{report_id},caf\u00e9,12.50\r\nz,"a, b",0\r\n'
            bom = "\ufeff" if report_id.startswith("bom") else ""
            _send(handler, 200, (bom + text).encode(), "text/csv; charset=utf-8")
        case "GET", ["catalog"]:
            version = dict(query).get("version") or "v1"
            etag = (("ETag", f'"{version}"'),)
            if version == "current":
                _send(handler, 304, b"", "", etag)
            else:
                _json(handler, 200, {"version": version, "sections": []}, etag)
        case "GET", ["search"]:
            names = [k for k, _ in query]
            _json(
                handler,
                200,
                {
                    "q": dict(query).get("q"),
                    "params": [[k, v] for k, v in query],
                    "names": sorted(set(names)),
                    "request_id": seen.headers.get("x-request-id"),
                    "hits": [_item(f"s{i}") for i in range(2)],
                    "empty": {},
                },
            )
        case "POST", ["files"] | ["forms"]:
            ctype = seen.headers.get("content-type", "")
            _json(handler, 200, {"received": len(seen.body), "kind": ctype.split(";")[0]})
        case "GET", ["users"]:
            org = dict(query).get("org")
            users = [{"name": n, "org": org, "roles": {}} for n in ("ann", "bob")]
            _json(handler, 200, {"users": users, "page": int(dict(query).get("page") or 1)})
        case "GET", ["stats"]:
            _json(
                handler,
                200,
                {"count": 42, "by_tag": {"red": 3, "sale": 2}, "empty": {}, "none": []},
            )
        case _:
            _json(handler, 404, {"error": "no such route"})


def start() -> FakeAPI:
    """A running fake on 127.0.0.1 (close it when done)."""
    return FakeAPI(responder=respond)
