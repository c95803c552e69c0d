"""Hostile documents: small generators for inputs that made the generator slow or large.

Each test counts the work done or bounds the output instead of timing it, so it fails
on a machine of any speed when the growth comes back, and never because CI is slow.
"""

from __future__ import annotations

from typing import Any

import pytest

from specgen import refs
from specgen.operations import generate


def ref_chain_document(links: int, operations: int) -> dict[str, Any]:
    """`links` parameters each a `$ref` to the next, the head used by every operation."""
    params: dict[str, Any] = {
        f"p{i}": {"$ref": f"#/components/parameters/p{i + 1}"} for i in range(links)
    }
    params[f"p{links}"] = {"name": "q", "in": "query", "schema": {"type": "string"}}
    paths = {
        f"/r{j}": {
            "get": {
                "operationId": f"op{j}",
                "parameters": [{"$ref": "#/components/parameters/p0"}],
                "responses": {"200": {"description": "ok"}},
            }
        }
        for j in range(operations)
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": paths,
        "components": {"parameters": params},
    }


def _count_pointer_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = refs.resolve_pointer

    def counting(doc: Any, fragment: str) -> Any:
        calls[0] += 1
        return real(doc, fragment)

    monkeypatch.setattr(refs, "resolve_pointer", counting)
    return calls


def test_a_long_ref_chain_used_by_every_operation_is_walked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before the memo every use followed the whole chain: links x operations walks
    # (4 million here); now each link is walked once.
    links, operations = 2000, 2000
    calls = _count_pointer_walks(monkeypatch)
    gen = generate(ref_chain_document(links, operations), name="chain")
    assert len(gen.operations) == operations
    assert calls[0] <= links + 1 + operations


def test_a_broken_chain_is_walked_once_however_often_it_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = ref_chain_document(500, 10)
    del doc["components"]["parameters"]["p500"]
    calls = _count_pointer_walks(monkeypatch)
    resolver = refs.Refs(doc, "chain")
    for i in range(200):
        with pytest.raises(
            refs.SpecError, match=r'\$ref "#/components/parameters/p500" does not resolve'
        ):
            resolver.deref({"$ref": "#/components/parameters/p0"}, f"use {i}")
    assert calls[0] == 501


def test_a_cycle_is_refused_wherever_it_is_entered() -> None:
    doc = {"a": {"$ref": "#/b"}, "b": {"$ref": "#/c"}, "c": {"$ref": "#/b"}}
    resolver = refs.Refs(doc, "loop")
    for start in ("#/a", "#/b", "#/c", "#/a"):
        with pytest.raises(refs.SpecError, match="is circular"):
            resolver.deref({"$ref": start}, "here")
