"""RunPool (runtime/pool.py): runs in warm worker processes, the key never on the pipe."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import GrantsError, RunPool, load_grants
from runtime.pool import job_args
from specgen.routes import parse_route_line
from tests.runtime.loopback import FakeAPI
from tests.runtime.test_run_cli import KEY, MINE, grants_file

CALLER = "support-agent"
RECALL = f'await memory.post("{MINE}/recall", {{query: "q"}}); print("recalled");'


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    fake = FakeAPI()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def pool_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunPool, Path]]:
    tmp = tmp_path_factory.mktemp("pool")
    path = grants_file(tmp)
    mp = pytest.MonkeyPatch()
    mp.setenv("CLOUDFLARE_API_TOKEN", KEY)  # the workers read it themselves, as the parent does
    with RunPool(path, workers=2) as pool:
        pool.warm()
        yield pool, path
    mp.undo()


def test_a_named_profile_runs_in_a_worker(pool_setup):
    pool, _ = pool_setup
    outcome = pool.run('print("hello", 6 * 7)', "agent-memory", caller=CALLER, clock="fixed")
    assert (outcome.result.exit_code, outcome.result.stdout) == (0, "hello 42\n")
    audit = json.loads(outcome.audit)
    assert (audit["profile"], audit["calls"], audit["denied"]) == ("agent-memory", [], 0)


def test_a_submitted_profile_keeps_its_base_url_and_the_worker_attaches_the_key(
    pool_setup, api: FakeAPI
):
    pool, path = pool_setup
    profile = load_grants(path, environ={"CLOUDFLARE_API_TOKEN": KEY}).select(
        "agent-memory", CALLER
    )
    futures = [
        pool.submit(RECALL, profile.with_base_url(api.url), caller=CALLER, scan_memory=True)
        for _ in range(4)
    ]
    for future in concurrent.futures.as_completed(futures):
        outcome = future.result()
        assert (outcome.result.exit_code, outcome.result.stdout) == (0, "recalled\n")
        assert outcome.memory_hits == 0
        assert [row.status for row in outcome.trace.rows] == [200]
    assert len(api.requests) == 4
    assert {r.headers["authorization"] for r in api.requests} == {f"Bearer {KEY}"}


def test_the_key_never_crosses_the_pipe(pool_setup):
    _, path = pool_setup
    profile = load_grants(path, environ={"CLOUDFLARE_API_TOKEN": KEY}).select(
        "agent-memory", CALLER
    )
    assert profile.token is not None
    with pytest.raises(TypeError):
        pickle.dumps(profile)  # a Secret refuses pickling: without job_args this would fail
    payload = pickle.dumps(job_args(RECALL, profile, caller=CALLER, scan_memory=True))
    assert KEY.encode() not in payload


def test_a_profile_that_differs_from_the_file_is_refused(pool_setup):
    pool, path = pool_setup
    profile = load_grants(path, environ={"CLOUDFLARE_API_TOKEN": KEY}).select(
        "agent-memory", CALLER
    )
    wider = dataclasses.replace(profile, allow=(*profile.allow, parse_route_line("GET /*")))
    with pytest.raises(GrantsError, match="differs from the grants file"):
        pool.run('print("x")', wider, caller=CALLER)


def test_a_caller_the_file_does_not_list_is_refused(pool_setup):
    pool, _ = pool_setup
    with pytest.raises(GrantsError, match="not available"):
        pool.run('print("x")', "agent-memory", caller="someone-else")
    with pytest.raises(GrantsError, match="not available"):
        pool.run('print("x")', "no-such-profile", caller=CALLER)


def test_a_bad_grants_file_is_refused_in_the_parent(tmp_path: Path):
    (tmp_path / "grants.json").write_text("{", "utf-8")
    with pytest.raises(GrantsError):
        RunPool(tmp_path / "grants.json", workers=1)


JWT_SECRET = "a-pool-signing-key-of-at-least-32-bytes"


def test_a_token_block_never_crosses_the_pipe(tmp_path: Path):
    """Every credential kind holds its key in the token block too, not only in `token`."""
    environ = {"K": KEY, "U": "pool-user", "P": "pool-password-1234", "S": JWT_SECRET}
    blocks = (
        {"env": "K", "header": "X-API-Key"},
        {"env": "K", "query": "api_key"},
        {"type": "basic", "user_env": "U", "password_env": "P"},
        {"type": "jwt", "secret_env": "S", "audience": "memory-api"},
    )
    for block in blocks:
        path = grants_file(tmp_path, token=block)
        profile = load_grants(path, environ=environ).select("agent-memory", CALLER)
        assert profile.credential is not None
        with pytest.raises(TypeError):
            pickle.dumps(profile)
        payload = pickle.dumps(job_args(RECALL, profile, caller=CALLER))
        for secret in environ.values():
            assert secret.encode() not in payload


@pytest.mark.parametrize("isolation", ["process", "worker"])
def test_a_jwt_profile_warms_up_and_each_run_mints_for_its_caller(
    tmp_path: Path, api: FakeAPI, monkeypatch: pytest.MonkeyPatch, isolation: str
):
    from joserfc import jwt
    from joserfc.jwk import OctKey

    monkeypatch.setenv("POOL_JWT_SECRET", JWT_SECRET)
    block = {"type": "jwt", "secret_env": "POOL_JWT_SECRET", "audience": "memory-api"}
    path = grants_file(tmp_path, token=block)
    profile = load_grants(path).select("agent-memory", CALLER)
    with RunPool(path, workers=1, isolation=isolation) as pool:
        pool.warm()  # the warm-up run mints for no real caller and sends nothing
        assert len(api.requests) == 0
        outcome = pool.run(RECALL, profile.with_base_url(api.url), caller=CALLER)
    assert (outcome.result.exit_code, outcome.result.stdout) == (0, "recalled\n")
    (seen,) = api.requests
    scheme, _, token = seen.headers["authorization"].partition(" ")
    claims = jwt.decode(token, OctKey.import_key(JWT_SECRET.encode()), ["HS256"]).claims
    assert (scheme, claims["sub"], claims["aud"]) == ("Bearer", CALLER, "memory-api")


def test_scan_memory_looks_for_the_workers_own_key(pool_setup):
    """The control for the zero above: code that spells the key out is found, so the
    worker really scans, with the key it read itself (the parent sent only a flag)."""
    pool, _ = pool_setup
    spelled = pool.run(f'const k = "{KEY}"; print(k.length)', "agent-memory", caller=CALLER,
                       scan_memory=True)  # fmt: skip
    assert spelled.memory_hits > 0
    plain = pool.run('print("no key here")', "agent-memory", caller=CALLER, scan_memory=True)
    assert plain.memory_hits == 0
