"""OData-style literal text in a route: `'`, `(`, `)` and `!` (Microsoft Graph's paths).

RFC 3986 lets a path segment hold the sub-delims as they are, and httpx sends them
unchanged; Go's PathEscape (the reference's rule) escapes them, so the reference build
keeps skipping such paths while the default build, the grants loader and the broker's
structured calls carry them. A value never brings one in: it is still percent-encoded
down to the unreserved set, so `(` in a value travels as `%28`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import Broker, HostRequest, Profile, Secret
from runtime import load_grants as load
from specgen import build as pipeline
from specgen.allow import parse_entry
from specgen.routes import pattern_error
from tests.runtime.loopback import FakeAPI

GRAPH = {
    "openapi": "3.0.3",
    "info": {"title": "Graph-like", "version": "1"},
    "paths": {
        "/drives('{drive-id}')/items": {
            "get": {
                "operationId": "list_drive_items",
                "parameters": [
                    {
                        "name": "drive-id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/me/microsoft.graph.delta()": {
            "get": {"operationId": "delta", "responses": {"200": {"description": "ok"}}}
        },
        "/me": {"get": {"operationId": "me", "responses": {"200": {"description": "ok"}}}},
    },
}


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    server = FakeAPI()
    yield server
    server.close()


def _build(tmp_path: Path, compat: str = "") -> pipeline.Result:
    doc = tmp_path / "graph.json"
    doc.write_text(json.dumps(GRAPH))
    return pipeline.run(str(doc), pipeline.Options(compat=compat))


def test_the_default_build_carries_odata_paths_and_the_reference_build_skips_them(
    tmp_path: Path,
) -> None:
    full = _build(tmp_path)
    assert [str(r) for r in full.gen.allow] == [
        "GET /drives('*')/items",
        "GET /me",
        "GET /me/microsoft.graph.delta()",
    ]
    assert full.gen.skipped == ()
    reference = _build(tmp_path, compat="reference")
    assert [s.reason for s in reference.gen.skipped] == [
        "has a parameter that is only part of a segment (\"drives('{drive-id}')\"); "
        "a grant's * stands for a whole segment",
        'maps to route "/me/microsoft.graph.delta()", which a grant cannot hold: '
        "path contains bytes that require wire encoding",
    ]


def test_only_the_extended_grammar_admits_the_sub_delims() -> None:
    assert pattern_error("/me/delta()", partial=True) is None
    assert pattern_error("/me/delta()") == "path contains bytes that require wire encoding"
    assert pattern_error("/me/a!b'c", partial=True) is None
    # still refused in either grammar: characters RFC 3986 does not allow in a path
    for bad in ('/me/"x"', "/me/a b", "/me/<x>", "/me/{x}", "/me/a|b"):
        assert pattern_error(bad, partial=True) is not None, bad


def test_the_broker_sends_the_literal_text_and_encodes_a_value(
    tmp_path: Path, api: FakeAPI
) -> None:
    grants = tmp_path / "grants.json"
    grants.write_text(
        json.dumps(
            {
                "profiles": {
                    "g": {
                        "base_url": api.url,
                        "allowed_callers": ["agent"],
                        "allow": ["GET /drives('*')/items", "GET /me/microsoft.graph.delta()"],
                    }
                }
            }
        )
    )
    profile = load(grants, environ={}).select("g", "agent")
    with Broker(profile) as broker:
        listed = broker(HostRequest("GET", "", route="/drives('*')/items", values=("a(b) c",)))
        delta = broker(HostRequest("GET", "", route="/me/microsoft.graph.delta()"))
    assert (listed.status, delta.status) == (200, 200)
    assert [r.path for r in api.requests] == [
        "/drives('a%28b%29%20c')/items",
        "/me/microsoft.graph.delta()",
    ]


def test_a_value_cannot_stand_for_literal_sub_delims(api: FakeAPI) -> None:
    """`*` still admits only unreserved characters, so a value cannot make the segment
    `delta()` from a route `/me/*`; it is sent encoded, as any value is."""
    entry = parse_entry("GET /me/*")
    profile = Profile(
        name="p",
        base_url=api.url,
        global_name="host",
        allowed_callers=("*",),
        allow=(entry.route,),
        entries=(entry,),
        token=Secret("k-odata-routes-test"),
    )
    with Broker(profile) as broker:
        raw = broker(HostRequest("GET", "/me/microsoft.graph.delta()"))
        structured = broker(HostRequest("GET", "", route="/me/*", values=("delta()",)))
    assert raw.status == 403  # the reference's raw call keeps the reference's rule
    assert structured.status == 200
    assert [r.path for r in api.requests] == ["/me/delta%28%29"]
