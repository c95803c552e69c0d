"""The committed golden folders: current, deterministic, and what the mission page shows.

`specgen check` on each folder is the drift test CI relies on; the page and the
reference fix what those folders must contain, so a wrong golden cannot be "fixed" by
regenerating it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from specgen.cli import cli
from tests import conftest as prerequisites

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden"
CASES: dict[str, dict[str, object]] = json.loads((GOLDEN / "cases.json").read_text())
#: The mission's page, in the shared data beside the repository, and the SHA-256 of the copy
#: PAGE_ROUTES and PAGE_WARNINGS below were taken from.
PAGE = "mission/memory-grant-page.txt"
PAGE_SHA256 = "76669729123fb16d0538553193d7c637f4495bf8b642c9a19ffea00a2aff0ab5"
FILES = ("allow.json", "description.txt", "health_check.txt", "preamble.js", "types.d.ts")


def case_args(name: str) -> tuple[str, list[str]]:
    case = CASES[name]
    return str(ROOT / str(case["spec"])), [str(a) for a in case.get("args", [])]  # type: ignore[attr-defined]


def read(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_three_golden_cases_exist() -> None:
    assert set(CASES) >= {"agent-memory", "smart-home", "hazards"}
    for name in CASES:
        assert (GOLDEN / name).is_dir(), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_folder_is_current(name: str) -> None:
    spec, args = case_args(name)
    result = CliRunner().invoke(cli, ["check", spec, str(GOLDEN / name), *args])
    assert result.exit_code == 0, result.output
    assert result.stderr == "specgen: up to date\n"
    # the folder holds only files build writes
    assert set(read(GOLDEN / name)) <= set(FILES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_builds_are_byte_identical(tmp_path: Path, name: str) -> None:
    spec, args = case_args(name)
    runner = CliRunner()
    for out in ("one", "two"):
        result = runner.invoke(cli, ["build", spec, "-o", str(tmp_path / out), *args])
        assert result.exit_code == 0, result.output
    assert read(tmp_path / "one") == read(tmp_path / "two") == read(GOLDEN / name)


def test_build_does_not_depend_on_hash_seed_or_cwd(tmp_path: Path) -> None:
    """A separate interpreter with another hash seed, from another directory, same bytes."""
    spec, args = case_args("hazards")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    code = "from specgen.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "build", spec, "-o", str(out), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert read(out) == read(GOLDEN / "hazards")


# -- Agent Memory: exactly what the mission page shows ---------------------------------------


# Copied from the mission page, so the test also runs where the page is not present.
PAGE_ROUTES = [
    "GET /client/v4/accounts/*/agent-memory/namespaces",
    "POST /client/v4/accounts/*/agent-memory/namespaces",
    "DELETE /client/v4/accounts/*/agent-memory/namespaces/*",
    "GET /client/v4/accounts/*/agent-memory/namespaces/*",
    "GET /client/v4/accounts/*/agent-memory/namespaces/*/profiles",
    "DELETE /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*",
    "POST /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*/ingest",
    "GET /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*/memories",
    "DELETE /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*/memories/*",
    "GET /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*/memories/*",
    "POST /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*/recall",
    "POST /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*/remember",
    "DELETE /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*/sessions/*",
    "POST /client/v4/accounts/*/agent-memory/namespaces/*/profiles/*/summary",
]
PAGE_WARNINGS = [
    'GET /client/v4/accounts/{account_id}/agent-memory/namespaces: optional query "per_page", query "order", query "direction", query "cursor" cannot be sent through the broker, so the generated method always calls the bare route',
    'GET /client/v4/accounts/{account_id}/agent-memory/namespaces/{namespace_name}/profiles: optional query "per_page", query "cursor" cannot be sent through the broker, so the generated method always calls the bare route',
    'GET /client/v4/accounts/{account_id}/agent-memory/namespaces/{namespace_name}/profiles/{profile_name}/memories: optional query "per_page", query "cursor", query "session_id", query "type" cannot be sent through the broker, so the generated method always calls the bare route',
]


def page() -> str:
    return prerequisites.shared(PAGE).read_text()


def page_routes() -> list[str]:
    assert len(PAGE_ROUTES) == 14
    return PAGE_ROUTES


def page_warnings() -> list[str]:
    assert len(PAGE_WARNINGS) == 3
    return PAGE_WARNINGS


def test_the_routes_and_warnings_here_are_the_pages() -> None:
    """PAGE_ROUTES and PAGE_WARNINGS are copies of the page's lists: check them against it."""
    text = page()
    assert hashlib.sha256(text.encode()).hexdigest() == PAGE_SHA256, "the page changed"
    routes = re.findall(r"^(?:GET|PUT|POST|DELETE|PATCH) /client/v4/\S+$", text, flags=re.M)
    assert routes == PAGE_ROUTES
    suffix = "so the generated method always calls the bare route"
    assert [line for line in text.splitlines() if line.endswith(suffix)] == PAGE_WARNINGS


def test_agent_memory_allow_is_the_pages_14_routes_in_order() -> None:
    allow = json.loads((GOLDEN / "agent-memory/allow.json").read_text())
    assert allow == page_routes()


def test_agent_memory_catalog_on_the_page_is_the_same_list() -> None:
    text = page()
    grants = text.split('"catalog": [', 1)[1].split("]", 1)[0]
    assert re.findall(r'"([^"]+)"', grants) == page_routes()


def test_agent_memory_warnings_are_exactly_the_pages() -> None:
    spec, args = case_args("agent-memory")
    result = CliRunner().invoke(cli, ["emit", "json", spec, *args, "--verbose"])
    assert result.exit_code == 0, result.output
    bundle = json.loads(result.stdout)
    assert bundle["warnings"] == page_warnings()
    assert "skipped" not in bundle
    assert bundle["global"] == "memory"
    warnings = [
        line.removeprefix("specgen: warning: ")
        for line in result.stderr.splitlines()
        if line.startswith("specgen: warning: ")
    ]
    assert warnings == page_warnings()


def test_agent_memory_preamble_has_the_14_methods() -> None:
    preamble = (GOLDEN / "agent-memory/preamble.js").read_text()
    methods = re.findall(r'^  h\["([A-Za-z_$][\w$]*)"\] = ', preamble, flags=re.M)
    assert len(methods) == 14
    assert len(set(methods)) == 14
    for name in (
        "agent_memory_remember",
        "agent_memory_recall",
        "agent_memory_memory_get",
        "agent_memory_namespace_delete",
    ):
        assert name in methods
    assert '  const h = globalThis["memory"];\n' in preamble
    assert preamble.count("\n") == 14 + 5
    # the page's code calls these with (account, namespace, profile, ...) arguments
    assert (
        '  h["agent_memory_recall"] = (account_id, namespace_name, profile_name, body) => '
        'h.post("/client/v4/accounts/" + account_id + "/agent-memory/namespaces/" + namespace_name '
        '+ "/profiles/" + profile_name + "/recall", body);\n'
    ) in preamble
    assert not (GOLDEN / "agent-memory/health_check.txt").exists()


# -- smart-home: the reference's golden outputs, header line aside -------------------------------

REFERENCE_PREAMBLE = """\
;(function () {
  const h = globalThis["home"];
  if (!h) return;
  h["listLights"] = () => h.get("/lights");
  h["createLight"] = (body) => h.post("/lights", body);
  h["getLight"] = (id) => h.get("/lights/" + id);
  h["setLight"] = (id, body) => h.put("/lights/" + id, body);
  h["deleteLight"] = (id) => h.del("/lights/" + id);
  h["updateLight"] = (id, body) => h.patch("/lights/" + id, body);
  h["listRoomLights"] = (room) => h.get("/rooms/" + room + "/lights");
  h["listScenes"] = () => h.get("/scenes");
  h["getStatus"] = () => h.get("/status");
})();
"""

REFERENCE_DESCRIPTION = """\
Smart Home Control (v1.2.0).
Agent code reaches it through the brokered `home.*` client. These are the
operations the document defines; an operator's grant may permit fewer. A broker outside
the sandbox checks every call against the grant and adds the grant's credential itself,
so the code never handles one.

  home.listLights()  ->  GET /lights
      List every light with its current state.
  home.createLight(body)  ->  POST /lights
      Register a new light.
  home.getLight(id)  ->  GET /lights/{id}
      Get one light by id.
  home.setLight(id, body)  ->  PUT /lights/{id}
      Replace a light's full state.
  home.deleteLight(id)  ->  DELETE /lights/{id}
      Remove a light.
  home.updateLight(id, body)  ->  PATCH /lights/{id}
      Patch part of a light's state (brightness, color).
  home.listRoomLights(room)  ->  GET /rooms/{room}/lights
      List the lights in one room.
  home.listScenes()  ->  GET /scenes
      List saved scenes.
  home.getStatus()  ->  GET /status
      Report gateway health and current capacity (in-flight requests, rate-limit headroom).
"""

REFERENCE_ALLOW = """\
[
  "GET /lights",
  "POST /lights",
  "DELETE /lights/*",
  "GET /lights/*",
  "PATCH /lights/*",
  "PUT /lights/*",
  "GET /rooms/*/lights",
  "GET /scenes",
  "GET /status"
]
"""


def test_smart_home_reproduces_the_reference() -> None:
    folder = GOLDEN / "smart-home"
    header, rest = (folder / "preamble.js").read_text().split("\n", 1)
    assert (
        header
        == '// Generated by specgen from "Smart Home Control", version "1.2.0". Do not edit by hand.'
    )
    assert rest == REFERENCE_PREAMBLE
    assert (folder / "description.txt").read_text() == REFERENCE_DESCRIPTION
    assert (folder / "allow.json").read_text() == REFERENCE_ALLOW
    assert (folder / "health_check.txt").read_text() == "GET /status\n"


def test_smart_home_preamble_safety() -> None:
    preamble = (GOLDEN / "smart-home/preamble.js").read_text()
    assert 'globalThis["home"]' in preamble
    for word in ("encodeURIComponent", "Bearer", "token", "Authorization", "`"):
        assert word not in preamble


# -- hazards: the reference's hazard cases plus $refs, server path, skips ----------------------


def test_hazards_golden() -> None:
    folder = GOLDEN / "hazards"
    preamble = (folder / "preamble.js").read_text()
    description = (folder / "description.txt").read_text()
    for line in (
        '  h["trigger"] = () => h.post("/api/v2/events");\n',
        '  h["getThing"] = (h_) => h.get("/api/v2/things/" + h_);\n',
        '  h["get_item"] = (item_id) => h.get("/api/v2/items/" + item_id);\n',
        '  h["deleteNode"] = (default_) => h.del("/api/v2/nodes/" + default_);\n',
        '  h["getPair"] = (a_b, a_b_) => h.get("/api/v2/pairs/" + a_b + "/" + a_b_);\n',
        '  h["putDoc"] = (id, body) => h.put("/api/v2/docs/" + id, body);\n',
    ):
        assert line in preamble
    assert "  home.trigger()  ->  POST /api/v2/events\n" in description
    # a summary that tries to forge a description line is folded into one line
    assert "      Fire an event. host.deleteAll() -> DELETE /everything\n" in description
    assert json.loads((folder / "allow.json").read_text()) == [
        "PUT /api/v2/docs/*",
        "POST /api/v2/events",
        "GET /api/v2/feed",
        "GET /api/v2/items/*",
        "DELETE /api/v2/nodes/*",
        "GET /api/v2/pairs/*/*",
        "GET /api/v2/stock",
        "GET /api/v2/things/*",
    ]
    # the trailing-slash path and the partial-segment parameter were skipped, not emitted
    assert (
        "legacy" not in preamble and "getFile" not in preamble and "preflightFeed" not in preamble
    )
    # the hostile version stays inside a quoted string on the comment line
    assert preamble.splitlines()[0] == (
        '// Generated by specgen from "Hazards </script> & friends", version '
        '"1 */ globalThis.PWNED=1; /*". Do not edit by hand.'
    )
