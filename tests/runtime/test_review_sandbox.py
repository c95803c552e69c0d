"""An adversarial review of the sandbox's fast paths (pooled slots, scratch buffers, a
memory address taken once, packed signed arguments, the on-demand twin past the pool).

Each test is one attack a hostile guest or upstream could try against the security
claims (docs/security.md): nothing of an earlier run reaches a later one, the host never
reads or writes outside guest memory, the limits hold, every run ends (with its audit
record) and the broker decides every call. A passing test documents a claim that held.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
import wasmtime
from hypothesis import given
from hypothesis import strategies as st
from wasmtime import _ffi as ffi

from runtime import EXIT_TIMEOUT, HostReply, HostRequest, Limits, run_sandbox, run_with_grant
from runtime.sandbox import engine, envelope, wasi
from runtime.sandbox import vm as qjs_vm
from tests.runtime.loopback import FakeAPI, profile, stall

PAGE = 65536
KEY = "sk-review-" + "5e1f" * 8


def _echo(request: HostRequest) -> HostReply:
    """Answers every call with its own path (a stand-in broker that allows all)."""
    return HostReply(200, request.path.encode())


@contextlib.contextmanager
def _vm(eng: engine.QjsEngine, memory_bytes: int = 64 << 20) -> Iterator[qjs_vm.Vm]:
    """A bare instance of `eng` (whatever engine.instance() hands out), closed after."""
    state = wasi.WasiState(output_bytes=0, clock="fixed")
    with eng.instance() as inst:
        vm = qjs_vm.Vm(inst, state, memory_bytes=memory_bytes, deadline_ticks=1 << 20)
        try:
            yield vm
        finally:
            vm.close()


def _grow(vm: qjs_vm.Vm, pages: int) -> bool:
    prev = ctypes.c_uint64()
    err = ffi.wasmtime_memory_grow(
        vm.context, ctypes.byref(vm.state.memory), pages, ctypes.byref(prev)
    )
    if err:
        ffi.wasmtime_error_delete(err)
    return not err


@contextlib.contextmanager
def _pool_exhausted() -> Iterator[engine.QjsEngine]:
    """Every slot of the process's pool taken, as by POOL_SLOTS runs in flight."""
    eng = engine.get_engine()
    taken = 0
    while eng._slots is not None and eng._slots.acquire(blocking=False):
        taken += 1
    try:
        yield eng
    finally:
        for _ in range(taken):
            eng._slots.release()  # type: ignore[union-attr]


def _initial_table_size(eng: engine.QjsEngine) -> int:
    for exp in eng.module.exports:
        if exp.name == engine.wasm_layout.TABLE_EXPORT:
            return exp.type.limits.min
    raise AssertionError("the module exports no table")


def _engines() -> list[engine.QjsEngine]:
    eng = engine.get_engine()
    return [eng, eng._overflow_engine()] if eng.pooled else [eng]


# -- 1. nothing of an earlier run reaches a later one ------------------------------------
def test_a_reused_slot_is_clean_far_above_the_pages_kept_resident(monkeypatch):
    # A pooled slot keeps 4 MiB resident and wasmtime must wipe the rest. Run 1 fills
    # ~18 MiB with a marker (and takes a 1 MiB upstream reply holding another); then the
    # very same slot (same memory address) is grown back to run 1's size and searched.
    eng = engine.get_engine()
    bases: list[int] = []
    attach = wasi.WasiState.attach_memory

    def spy(self, memory, context):
        attach(self, memory, context)
        bases.append(self._mem_base)

    monkeypatch.setattr(wasi.WasiState, "attach_memory", spy)
    marker, upstream = b"Rv1-guest-left-this-", b"Rv1-upstream-sent-this-"
    small = b"Rv1-small-string-in-the-low-heap-"

    def handler(request: HostRequest) -> HostReply:
        return HostReply(200, upstream * (1 << 15))

    first: list[bytes] = []
    code = (
        f"globalThis.s = Array.from({{length: 3000}}, (_, i) => {small.decode()!r} + i);"
        f" globalThis.k = {marker.decode()!r}.repeat(1 << 20);"
        " globalThis.r = __coderunner_host_call(JSON.stringify({method: 'GET', path: '/a'}));"
        " print(k.length, r.body.length);"
    )
    r = run_sandbox(code, handler=handler, memory_probe=first.append)
    assert r.exit_code == 0, r.stderr
    # The search works: both markers are in run 1's memory, far above the resident part.
    assert first[0].rfind(marker) > engine.POOL_KEEP_RESIDENT_BYTES
    assert upstream in first[0]
    assert -1 < first[0].find(small) < engine.POOL_KEEP_RESIDENT_BYTES  # resident pages too
    run_base, run_pages = bases[-1], len(first[0]) // PAGE
    table_size = _initial_table_size(eng)
    with contextlib.ExitStack() as held:
        for _ in range(engine.POOL_SLOTS):
            vm = held.enter_context(_vm(eng, memory_bytes=len(first[0])))
            if vm.state._mem_base == run_base:
                break
        else:
            assert not eng.pooled, "no pooled slot reused run 1's memory"
            return
        have = len(vm.state.snapshot(vm.context)) // PAGE
        assert _grow(vm, run_pages - have)
        later = vm.state.snapshot(vm.context)
        assert len(later) == len(first[0])
        assert marker not in later and upstream not in later and small not in later
        # Run 1 grew the function table by its host functions; the slot's table is the
        # module's own again (nothing of run 1's Store is callable from it).
        assert ffi.wasmtime_table_size(vm.context, ctypes.byref(vm.table)) == table_size


def test_a_short_reply_left_in_the_scratch_buffer_is_gone_in_the_next_run():
    # Short bodies go through a per-instance scratch buffer that the image carries; the
    # buffer must come from the image (built before any agent ran), never from run 1.
    secret = b"Rv1-short-reply-" + b"9" * 40

    def handler(request: HostRequest) -> HostReply:
        return HostReply(200, secret if request.path == "/secret" else b"x")

    env = "JSON.stringify({method: 'GET', path: '/secret'})"
    first: list[bytes] = []
    r = run_sandbox(
        f"print(__coderunner_host_call({env}).body.length)",
        handler=handler,
        memory_probe=first.append,
    )
    assert (r.exit_code, r.stdout) == (0, f"{len(secret)}\n"), r.stderr
    assert secret in first[0]  # the buffer (and the guest's string) held it
    later: list[bytes] = []
    r = run_sandbox("print(1)", handler=handler, memory_probe=later.append)
    assert r.exit_code == 0 and secret not in later[0]


# -- 2. the host never reads or writes outside guest memory ------------------------------
@pytest.mark.parametrize(
    ("addr", "n"),
    [
        (-1, 1),  # a negative i32 is address 0xFFFFFFFF
        (-4, 4),
        (0x7FFFFFFF, 1),
        (0, -1),  # a negative length
        (0, 1 << 40),
        (16, (1 << 64) - 8),  # a length that would wrap a 64-bit sum
        (None, 1),  # one byte past the top
        (None, 0x1_0000_0000),
    ],
)
def test_hostile_addresses_and_lengths_are_refused(addr, n):
    with _vm(engine.get_engine()) as vm:
        size = len(vm.state.snapshot(vm.context))
        at = size if addr is None else addr
        with pytest.raises(wasi.GuestMemoryError):
            vm.read(at, n)
        if at & 0xFFFFFFFF >= size:  # an address past the top: a write there is refused too
            with pytest.raises(wasi.GuestMemoryError):
                vm.write(at, b"\xaa")


def test_the_top_byte_is_reachable_and_the_next_is_not_after_growth():
    # The cached size must follow growth up (reads at the new top work) and the cached
    # address must still be the memory's (what the host reads is what wasm wrote).
    with _vm(engine.get_engine(), memory_bytes=256 << 20) as vm:
        assert _grow(vm, 1024)
        size = len(vm.state.snapshot(vm.context))
        vm.write(size - 8, b"top-byte")
        base = ctypes.cast(
            ffi.wasmtime_memory_data(vm.context, ctypes.byref(vm.state.memory)), ctypes.c_void_p
        ).value
        assert base == vm.state._mem_base
        assert ctypes.string_at(base + size - 8, 8) == b"top-byte"
        for at, n in ((size - 7, 8), (size, 0 + 1), (size - 1, 2)):
            with pytest.raises(wasi.GuestMemoryError):
                vm.read(at, n)


def test_an_iovec_that_wraps_the_32_bit_space_is_refused():
    # fd_write with an iovec (ptr near 4 GiB, len past it): a u32 sum would wrap to a
    # small, valid-looking address; the host must see the true end and refuse.
    with _vm(engine.get_engine()) as vm:
        state = vm.state
        vm.write(64, b"\xf0\xff\xff\xff" + (0x20).to_bytes(4, "little"))
        vals = (ffi.wasmtime_val_raw_t * 4)()
        for i, v in enumerate((1, 64, 1, 128)):
            vals[i].i32 = v
        wasi.IMPORTS["fd_write"][2](state, vm.context, vals)
        assert vals[0].i32 == wasi.EINVAL and state.out[1] == b""


def test_a_grown_guest_hands_the_host_an_envelope_above_the_old_top():
    # The guest grows its memory by ~100 MiB, then builds an envelope there: the host
    # reads it through the address taken before the growth.
    code = (
        "globalThis.big = 'g'.repeat(100 << 20);"
        " const p = '/a/' + 'z'.repeat(3000) + big.length;"
        " const r = __coderunner_host_call(JSON.stringify({method: 'GET', path: p}));"
        " print(r.body === p, r.body.length);"
    )
    probe: list[bytes] = []
    r = run_sandbox(code, handler=_echo, memory_probe=probe.append)
    assert (r.exit_code, r.stdout) == (0, f"true {3 + 3000 + 9}\n"), r.stderr
    assert len(probe[0]) > 100 << 20


@pytest.mark.parametrize("value", [(1 << 64) - 1, -(1 << 63) - 1, (1 << 70) - 1, -1])
def test_out_of_range_integer_arguments_are_wrapped_not_misread(value):
    # Arguments are packed signed now; one outside the i64 range takes the slow path and
    # is wrapped to 64 bits, as before. malloc(0xFFFFFFFF) fails: no huge buffer appears.
    with _vm(engine.get_engine()) as vm:
        assert vm.call("malloc", value) == 0
        assert vm.call("malloc", 16) != 0


# -- 3. limits hold with the pool and the 4 GiB reservation ------------------------------
@pytest.mark.parametrize("which", ["pooled", "twin"])
def test_memory_limit_holds_on_both_allocators(which):
    eng = _engines()[0 if which == "pooled" else -1]
    limit = 24 << 20
    with _vm(eng, memory_bytes=limit) as vm:
        have = len(vm.state.snapshot(vm.context)) // PAGE
        assert not _grow(vm, limit // PAGE - have + 1)
        assert _grow(vm, limit // PAGE - have)
        assert len(vm.state.snapshot(vm.context)) == limit
        assert not _grow(vm, 1)
        with pytest.raises(wasi.GuestMemoryError):
            vm.read(limit, 1)


@pytest.mark.parametrize("which", ["pooled", "twin"])
def test_a_guest_cannot_allocate_past_memory_mb_on_either_allocator(which):
    probe: list[bytes] = []
    code = "const a = []; for (;;) a.push('m'.repeat(1 << 20) + a.length);"
    with contextlib.ExitStack() as stack:
        if which == "twin":
            stack.enter_context(_pool_exhausted())
        r = run_sandbox(code, limits=Limits(memory_mb=16, timeout_s=10), memory_probe=probe.append)
    assert r.exit_code != 0 and not r.timed_out, r
    assert len(probe[0]) <= 16 << 20


# -- 4. every run ends, its slot is released, its audit is written -----------------------
_HOSTILE_ENDINGS = [
    # (code, handler, limits, expected exit code)
    ("for (;;) {}", None, Limits(timeout_s=0.2), EXIT_TIMEOUT),
    (
        "__coderunner_host_call(JSON.stringify({method: 'GET', path: '/slow'}))",
        "slow",
        Limits(timeout_s=0.2),
        EXIT_TIMEOUT,
    ),
    (
        "import * as std from 'qjs:std'; __coderunner_host_call({toString() { std.exit(7); }})",
        _echo,
        Limits(timeout_s=5),
        7,
    ),
    (  # a host fault answers the call (no detail); the guest then fails on purpose
        "const r = __coderunner_host_call(JSON.stringify({method: 'GET', path: '/a'}));"
        " if (r.status < 500) throw new Error('a faulty broker answered ' + r.status);"
        " throw new Error(r.body);",
        "raises",
        Limits(timeout_s=5),
        1,
    ),
    (
        "const a = []; for (;;) a.push('m'.repeat(1 << 20) + a.length);",
        None,
        Limits(memory_mb=8, timeout_s=5),
        None,
    ),
    (
        "Object.defineProperty(Object.prototype, 'then', {get() { for (;;) {} }});"
        " await __coderunner_host_start(JSON.stringify({method: 'GET', path: '/a'}));",
        _echo,
        Limits(timeout_s=0.3),
        EXIT_TIMEOUT,
    ),
    ("function f() { return f() + 1; } f();", None, Limits(timeout_s=5), None),
    (  # the deadline passes inside a call the host makes while serving a host call
        "__coderunner_host_call({toString() { for (;;) {} }})",
        _echo,
        Limits(timeout_s=0.2),
        EXIT_TIMEOUT,
    ),
]


def _handler(kind):
    if kind == "slow":
        return lambda request: (threading.Event().wait(0.6), HostReply(200, b"late"))[1]
    if kind == "raises":

        def raises(request: HostRequest) -> HostReply:
            raise RuntimeError("planted upstream fault")

        return raises
    return kind


def test_hostile_endings_release_every_pool_slot():
    # Each run ends badly (timeout inside a host call, exit inside one, a host fault, out
    # of memory, a hostile `then` getter during settle, stack overflow). With the cyclic
    # GC off, a Store kept alive by any of them would keep its wasmtime slot; then the
    # whole pool, taken at once, could not be instantiated.
    eng = engine.get_engine()
    gc.disable()
    try:
        for code, kind, limits, expected in _HOSTILE_ENDINGS:
            r = run_sandbox(code, handler=_handler(kind), limits=limits)
            assert r.exit_code != 0, (code, r)
            assert "planted" not in r.stdout + r.stderr  # a host fault's detail stays out
            if expected is not None:
                assert r.exit_code == expected, (code, r)
        with contextlib.ExitStack() as held:
            for _ in range(engine.POOL_SLOTS):
                held.enter_context(_vm(eng, memory_bytes=8 << 20))
    finally:
        gc.enable()
    ok = run_sandbox("print(6 * 7)")
    assert (ok.exit_code, ok.stdout) == (0, "42\n")


def test_more_runs_at_once_than_slots_all_finish_with_their_own_replies():
    # POOL_SLOTS + 6 runs alive at the same moment (each waits in its host call until all
    # have started): the surplus runs on the twin; each gets exactly its own reply.
    n = engine.POOL_SLOTS + 6
    everyone = threading.Barrier(n, timeout=120)

    def handler(request: HostRequest) -> HostReply:
        everyone.wait()
        return HostReply(200, request.path.encode())

    def one(i: int):
        code = (
            f"const r = __coderunner_host_call(JSON.stringify({{method: 'GET', path: '/r/{i}'}}));"
            " print(r.body);"
        )
        return run_sandbox(code, handler=handler, limits=Limits(timeout_s=120))

    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(one, range(n)))
    assert [(r.exit_code, r.stdout) for r in results] == [(0, f"/r/{i}\n") for i in range(n)]
    eng = engine.get_engine()
    assert not eng.pooled or eng._overflow is not None


@pytest.mark.parametrize("where", ["pool", "twin"])
def test_a_timeout_while_upstream_stalls_still_ends_with_the_audit(where):
    api = FakeAPI(responder=stall(3.0))
    try:
        grant = profile(api.url, KEY, ("GET /x",))
        code = 'await host.get("/x");'
        with _pool_exhausted() if where == "twin" else contextlib.nullcontext():
            outcome = run_with_grant(code, grant, limits=Limits(timeout_s=0.5))
    finally:
        api.close()
    # The broker's deadline is the run's: the call ends as a 504 the guest did not catch
    # (exit 1), or the sandbox's own clock ends the run first (exit 124).
    assert outcome.result.exit_code in (1, EXIT_TIMEOUT), outcome.result
    record = orjson.loads(outcome.audit)
    assert [(c["method"], c["route"]) for c in record["calls"]] == [("GET", "/x")]
    assert KEY not in outcome.audit + outcome.result.stdout + outcome.result.stderr


# -- 5. the broker decides every call, on the twin too -----------------------------------
@pytest.mark.parametrize("where", ["pool", "twin"])
def test_the_broker_refuses_an_ungranted_call_on_either_allocator(where, api):
    grant = profile(api.url, KEY, ("GET /x",))
    code = (
        'const ok = await host.get("/x");'
        " const raw = globalThis.__coderunner_host_call;"
        ' const no = raw(JSON.stringify({method: "DELETE", path: "/x"}));'
        " console.log(no.status);"
    )
    with _pool_exhausted() if where == "twin" else contextlib.nullcontext():
        outcome = run_with_grant(code, grant)
    assert (outcome.result.exit_code, outcome.result.stdout) == (0, "403\n"), outcome.result
    assert [(s.method, s.path) for s in api.requests] == [("GET", "/x")]
    assert orjson.loads(outcome.audit)["denied"] == 1
    assert all(s.headers.get("authorization") == f"Bearer {KEY}" for s in api.requests)


# -- 6. the envelope's whitespace skip is the old one ------------------------------------
def _old_skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in envelope._WS:
        i += 1
    return i


@given(st.text(alphabet=' \t\n\r\x0b\x0c\u00a0\u2028\u3000x{}"', max_size=40), st.integers(0, 45))
def test_whitespace_skip_matches_the_per_character_loop(s, i):
    assert envelope._skip_ws(s, min(i, len(s))) == _old_skip_ws(s, min(i, len(s)))


# -- 7. nothing reaches a Store that is gone ---------------------------------------------
def test_a_host_import_called_with_a_closed_runs_state_is_refused():
    with _vm(engine.get_engine()) as vm:
        state = vm.state
    for call in (lambda: state.read(None, 0, 1), lambda: state.write(None, 0, b"x")):
        with pytest.raises(wasi.GuestMemoryError):
            call()
    with pytest.raises(wasi.GuestMemoryError):
        state.snapshot(None)


def test_a_trap_does_not_leave_the_trap_slot_set_for_the_next_call():
    # One trap slot per instance: after a call that traps (epoch deadline passed), the
    # slot must be clear, or the next good call would be reported as that trap.
    eng = engine.get_engine()
    state = wasi.WasiState(output_bytes=0, clock="fixed")
    with eng.instance() as inst:
        vm = qjs_vm.Vm(inst, state, memory_bytes=32 << 20, deadline_ticks=1)
        try:
            threading.Event().wait(engine.EPOCH_TICK_S * 6)
            with pytest.raises(wasmtime.Trap):
                vm.call("malloc", 16)
            assert not vm._trap
            vm.store.set_epoch_deadline(1 << 20)
            assert vm.call("malloc", 16) != 0
        finally:
            vm.close()


def test_a_failing_end_of_run_step_still_drops_the_store_before_its_slot_is_freed():
    # The end-of-run steps (the memory probe, closing the bridge) may fail; the Store must
    # still be dropped and unregistered inside the slot's block. Otherwise the slot counts
    # as free while wasmtime still holds it (a concurrent run then fails to instantiate
    # instead of taking the twin) and the run's state stays in the registry for good.
    eng = engine.get_engine()
    released_with_store_alive: list[bool] = []
    live: list[qjs_vm.Vm] = []
    init = qjs_vm.Vm.__init__

    def tracking_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        live.append(self)

    class Slots:
        def __init__(self, real):
            self.real = real

        def acquire(self, blocking=True):
            return self.real.acquire(blocking=blocking)

        def release(self):
            released_with_store_alive.append(any(v.store is not None for v in live))
            self.real.release()

    def broken_probe(memory: bytes) -> None:
        raise RuntimeError("planted probe fault")

    before = set(wasi._RUNS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(qjs_vm.Vm, "__init__", tracking_init)
        if eng._slots is not None:
            mp.setattr(eng, "_slots", Slots(eng._slots))
        r = run_sandbox("print(1)", memory_probe=broken_probe)
    assert (r.exit_code, r.internal_error) == (70, "RuntimeError")
    assert set(wasi._RUNS) == before
    assert live and all(v.store is None for v in live)
    assert not any(released_with_store_alive)


_LIMITED_AS = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30))
from runtime import run_with_grant
from runtime.sandbox import engine
from tests.runtime.loopback import FakeAPI, profile
api = FakeAPI()
try:
    out = run_with_grant('print((await host.get("/x")).ok)', profile(api.url, "k" * 20, ("GET /x",)))
finally:
    api.close()
print(engine.get_engine().pooled, out.result.exit_code, out.result.stdout.strip(), len(api.requests))
print(out.audit)
"""


def test_a_process_with_a_limited_address_space_runs_on_demand_with_its_audit():
    # wasmtime panics (aborting the whole process, no audit) when it cannot map the pool;
    # under a finite RLIMIT_AS the engine must not even try, and runs must still work.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _LIMITED_AS], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, audit = done.stdout.splitlines()[-2:]
    assert first == "False 0 true 1"
    assert [c["route"] for c in orjson.loads(audit)["calls"]] == ["/x"]


def test_host_calls_made_from_a_then_getter_while_a_reply_settles_keep_their_own_replies():
    # Resolving a promise with the reply object reads its `then`: guest code running
    # inside settle (which has its argument in a scratch word) makes more host calls,
    # which reuse the reply and string scratch buffers. Every reply must stay its own.
    code = """
const env = (p) => JSON.stringify({method: 'GET', path: p});
const seen = [];
Object.defineProperty(Object.prototype, 'then', {configurable: true, get() {
  if (seen.length < 3) seen.push(__coderunner_host_call(env('/in/' + seen.length)).body);
  return undefined;
}});
const r = await __coderunner_host_start(env('/outer/' + 'o'.repeat(5000)));
delete Object.prototype.then;
print(r.status, r.body.length, seen.every((b, i) => b === '/in/' + i), seen.length > 0);
"""
    r = run_sandbox(code, handler=_echo)
    assert (r.exit_code, r.stdout) == (0, f"200 {len('/outer/') + 5000} true true\n"), r.stderr


_FULL_ADDRESS_SPACE = """
import mmap
held, size = [], 1 << 46
while size >= 64 << 30:  # take the address space until less than ~128 GiB is left
    try:
        held.append(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0))
    except OSError:
        size >>= 1
from runtime import run_with_grant
from runtime.sandbox import engine
from tests.runtime.loopback import FakeAPI, profile
api = FakeAPI()
try:
    out = run_with_grant('print((await host.get("/x")).ok)', profile(api.url, "k" * 20, ("GET /x",)))
finally:
    api.close()
print(engine.get_engine().pooled, out.result.exit_code, out.result.stdout.strip(), len(api.requests))
print(out.audit)
"""


def test_an_address_space_too_full_for_the_pool_runs_on_demand_with_its_audit():
    # No RLIMIT_AS, but too little address space left for the pool (~258 GiB): wasmtime
    # would panic and abort the process on the first run, before its audit. Runs must
    # fall back to on-demand instances, which need only ~4 GiB each.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _FULL_ADDRESS_SPACE],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-800:]
    first, audit = done.stdout.splitlines()[-2:]
    assert first == "False 0 true 1"
    assert [c["route"] for c in orjson.loads(audit)["calls"]] == ["/x"]


@pytest.mark.parametrize("where", ["pool", "twin"])
def test_the_call_budget_holds_on_either_allocator(where):
    calls: list[str] = []

    def handler(request: HostRequest) -> HostReply:
        calls.append(request.path)
        return HostReply(200, b"ok")

    code = (
        "const s = [];"
        " for (let i = 0; i < 5; i++)"
        " s.push(__coderunner_host_call(JSON.stringify({method: 'GET', path: '/b/' + i})).status);"
        " for (let i = 5; i < 7; i++)"
        " s.push((await __coderunner_host_start(JSON.stringify({method: 'GET', path: '/b/' + i}))).status);"
        " print(s.join(' '));"
    )
    with _pool_exhausted() if where == "twin" else contextlib.nullcontext():
        r = run_sandbox(code, handler=handler, limits=Limits(max_host_calls=3))
    assert (r.exit_code, r.stdout) == (0, "200 200 200 429 429 429 429\n"), r.stderr
    assert calls == ["/b/0", "/b/1", "/b/2"]
