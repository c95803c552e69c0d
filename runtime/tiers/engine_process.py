"""An engine process: runs agent code for a broker in another process, holding no key.

Started by `runtime.tiers.launch` as `python -I -m runtime.tiers.engine_process`, with
an empty environment (but for the cache folder's path), only stdin, stdout and stderr
open, and, on the `worker` and `gvisor` tiers, no network and a read-only view of the
few folders Python and the engine need (never the grants file). It lowers its own
resource limits first (hard and soft, so nothing it later runs can raise them), loads
the engine, says `hello`, and then does one thing at a time for the broker on the other
end of its stdin/stdout:

- `warm` {ref, forget, grant}: keep the grant (the guest's view of it) as number `ref`
  and build its memory image (a run of no code, no handler), so a later run of that
  grant restores it in about a millisecond; first drop the grants numbered in `forget`;
- `run` {code, grant, limits, probe}: run the code under the grant numbered `grant`
  (the same objects every run, so its prelude is composed once); each host call goes
  to the broker as a `call` (the guest blocked) or `start` (a promise) frame and waits
  for its `reply`;
  the run ends with `done` {result} (and the guest's memory, when `probe` asks for it);
- `hold` / `release`, during a run: the broker began or ended holding a call for a
  person's approval. The run's clock here (`RunClock`, read by the sandbox's Bridge)
  stops between the two, as the broker's own does, so the time a person takes is not
  counted against the run here either. Only the broker sends these: the engine has no
  way to stop the broker's clock, which is the one that ends the run;
- with `--test-escape-hook` only (tests start it so; no command line of specgen can):
  `escape` {source} runs Python source here, standing for an escape from QuickJS and
  wasmtime (arbitrary native code in this process), and answers `escaped` {result}.

It imports nothing from `runtime.broker` (test_import_graph.py, and a wall test looks
at `sys.modules`): it can decide nothing, it can only ask.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime.contract import HostReply, HostRequest
from runtime.run_clock import RunClock
from runtime.sandbox import runner
from runtime.tiers import wire

#: Engine side of the pipe: it reads what the broker sends, so its bounds are the run's.
_MAX_FROM_BROKER_JSON = 64 << 20
_MAX_FROM_BROKER_BLOB = 64 << 20
#: How long a host call waits past the run's deadline for the broker's reply.
_REPLY_GRACE_S = 2.0

_IN, _OUT = 0, 1


class _Pipe:
    """Frames to the broker (one writer at a time), and the frames coming back, read by
    whichever thread is waiting for one.

    No thread reads the pipe for the others: a thread waiting for a reply (or the main
    loop, for the broker's next order) reads it itself while no other thread is, and
    hands on what is not its own. A guest awaiting one call at a time so reads its own
    reply, with no other thread to wake per call; with several waiting, one reads for
    all and the rest sleep until their frame arrives or it is their turn to read. A
    thread waits only while a frame is due to it, so the pipe is read whenever the
    broker has something to send: a reply is sent only to a call that waits for it, and
    a hold only while a call is in flight.
    """

    def __init__(self, fd_in: int = _IN, fd_out: int = _OUT) -> None:
        self._out = fd_out
        self._writing = threading.Lock()
        #: Started calls' frames not written yet, in the guest's order, by call id.
        self._held: list[tuple[int, dict[str, Any], bytes]] = []
        self._ids = itertools.count(1)
        self._reader = wire.FrameReader(fd_in, spin_s=wire.SPIN_S)
        #: Guards everything below; waiters sleep on `_changed` for their frame or turn.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._reading = False
        self._gone = False
        #: Calls asked and still waited for, and the replies read but not yet collected.
        self._wanted: set[int] = set()
        self._replies: dict[int, HostReply] = {}
        #: Frames other than replies and holds, for the main loop.
        self._orders: collections.deque[tuple[dict[str, Any], bytes]] = collections.deque()
        #: The current run's clock, which the broker's `hold` and `release` frames stop
        #: and restart; the holds they opened, innermost last.
        self._clock: RunClock | None = None
        self._holds: list[contextlib.AbstractContextManager[None]] = []

    def begin_run(self, clock: RunClock, spin_s: float) -> None:
        """A run starts: calls a past run left waiting get no reply from this one, and
        replies are looked for as long as the broker said (`wire.spin_for`)."""
        self._reader.set_spin(spin_s)
        with self._lock:
            self._clock, self._holds = clock, []
            self._wanted.clear()
            self._replies.clear()

    def _hold(self, kind: str) -> None:
        """Mirror one of the broker's holds on this run's clock."""
        with self._lock:
            if kind == "hold" and self._clock is not None:
                hold = self._clock.hold()
                hold.__enter__()
                self._holds.append(hold)
            elif kind == "release" and self._holds:
                self._holds.pop().__exit__(None, None, None)

    def send(self, header: dict[str, Any], blob: bytes = b"") -> None:
        """Write one frame, after every held one (in the order they were held)."""
        frame = wire.encode(header, blob)
        with self._writing:
            self._write(frame)

    def go(self, call_id: int, *, inline: bool) -> None:
        """Let the broker send a started call. Said on the guest's own thread of the
        call held last (the guest awaits it alone), it is a field of that call's
        `start` frame, which goes out now: one frame per awaited call, not two."""
        with self._writing:
            if inline and self._held and self._held[-1][0] == call_id:
                _, header, blob = self._held.pop()
                header["go"] = True
                self._write(wire.encode(header, blob))
            else:
                self._write(wire.encode({"t": "go", "id": call_id, "inline": inline}))

    def _write(self, frame: bytes) -> None:
        """Every held frame, then this one, in one write (`_writing` held)."""
        if self._held:
            frame = b"".join([*(wire.encode(h, b) for _, h, b in self._held), frame])
            self._held.clear()
        view = memoryview(frame)
        while view:
            view = view[os.write(self._out, view) :]

    def hold(self, call_id: int, header: dict[str, Any], blob: bytes = b"") -> None:
        """Keep a started call's frame to go out with the next one sent (see
        `PipeHandler`), unencoded until then: its `go` may join it."""
        with self._writing:
            self._held.append((call_id, header, blob))

    def ask(self, kind: str, request: HostRequest) -> int:
        """Send (`call`) or hold (`start`) one call's frame; its id, for `reply`."""
        call_id = next(self._ids)
        with self._lock:
            self._wanted.add(call_id)
        header, body = wire.request_frame(kind, call_id, request)
        if kind == "start":
            self.hold(call_id, header, body)
        else:
            self.send(header, body)
        return call_id

    def reply(self, call_id: int, deadline: Callable[[], float]) -> HostReply:
        """The broker's reply to one call, waited for until `deadline()` (looked at
        again as it passes: a hold for approval moves it)."""
        arrived = self._await(lambda: call_id in self._replies, deadline)
        with self._lock:
            self._wanted.discard(call_id)
            reply = self._replies.pop(call_id, None)
        if reply is not None:
            return reply
        if not arrived:
            raise TimeoutError("no reply from the broker before the run's deadline")
        raise ConnectionError("the broker is gone")

    def next_order(self) -> tuple[dict[str, Any], bytes] | None:
        """The broker's next frame for the main loop; None once the broker is gone."""
        self._await(lambda: bool(self._orders), None)
        with self._lock:
            return self._orders.popleft() if self._orders else None

    def _await(self, ready: Callable[[], bool], deadline: Callable[[], float] | None) -> bool:
        """Until `ready()` (looked at under the lock) or the broker is gone: True; False
        at the deadline. Reads the pipe itself whenever no other thread is reading it."""
        with self._lock:
            while not (ready() or self._gone):
                if not self._reading:
                    self._reading = True
                    break
                left = None if deadline is None else deadline() - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._changed.wait(left)
            else:
                return True
        try:
            return self._read_until(ready, deadline)
        finally:
            with self._lock:
                self._reading = False
                self._changed.notify_all()  # another waiter, if any, reads next

    def _read_until(self, ready: Callable[[], bool], deadline: Callable[[], float] | None) -> bool:
        """Read and hand on frames until `ready()`; the reading thread only."""
        while True:
            with self._lock:
                if ready() or self._gone:
                    return True
            until = None if deadline is None else deadline()
            if until is not None and until <= time.monotonic():
                return False
            try:
                header, blob = self._reader.read(
                    deadline=until, max_json=_MAX_FROM_BROKER_JSON, max_blob=_MAX_FROM_BROKER_BLOB
                )
                self._hand_on(header, blob)
            except wire.WireTimeout:
                continue  # a partial frame stays buffered; the deadline is looked at again
            except wire.WireError:
                with self._lock:  # the broker is gone: so is this process's reason to be
                    self._gone = True
                return True

    def _hand_on(self, header: dict[str, Any], blob: bytes) -> None:
        """One frame from the broker to whoever it is for."""
        kind = header["t"]
        if kind == "reply":
            reply = wire.reply_from(header, blob)
            with self._lock:
                call_id = header.get("id")
                if call_id in self._wanted:
                    self._wanted.discard(call_id)
                    self._replies[call_id] = reply
                    self._changed.notify_all()
        elif kind in ("hold", "release"):
            self._hold(kind)
        else:
            with self._lock:
                self._orders.append((header, blob))
                self._changed.notify_all()


class PipeHandler:
    """The sandbox's `HostHandler` in an engine process: every call is the broker's.

    `start` queues the call's frame, on the guest's thread and in the guest's order; it
    goes out ahead of the next frame written (the `go` of this or another call, a
    blocking call, the run's `done`), so the broker decides started calls in the
    guest's order exactly as in-process (`Broker.start`), and a guest awaiting one call
    at a time costs one write and one wake-up per call, not two. What `start` returns
    is what the sandbox runs when it sends the call (`dispatch`): it says `go`, and
    then waits for the reply. `go` says whether it runs on the guest's own thread (the
    guest waits for this one call and can start no other meanwhile), so the broker
    sends it on its reading thread, without handing it to another, as the in-process
    bridge does; a call the run never sent gets no `go`, and the broker records it as
    admitted and never sent, as in-process.
    """

    def __init__(self, pipe: _Pipe, clock: RunClock) -> None:
        self._pipe = pipe
        self._clock = clock

    def _deadline(self) -> float:
        """When a reply is given up on: the run's deadline (moved by holds), and a grace."""
        return self._clock.deadline() + _REPLY_GRACE_S

    def __call__(self, request: HostRequest) -> HostReply:
        return self._pipe.reply(self._pipe.ask("call", request), self._deadline)

    def start(self, request: HostRequest) -> Any:
        call_id = self._pipe.ask("start", request)
        guest = threading.get_ident()

        def send() -> HostReply:
            self._pipe.go(call_id, inline=threading.get_ident() == guest)
            return self._pipe.reply(call_id, self._deadline)

        return send


def _limit_self(address_space_mb: int, cpu_s: int, open_files: int, file_mb: int) -> None:
    """Lower this process's limits, soft and hard alike (they cannot be raised again
    without CAP_SYS_RESOURCE, which the tiers' engine processes do not hold).

    RLIMIT_DATA, not RLIMIT_AS: wasmtime's pooling allocator reserves many GiB of
    address space it never touches (PROT_NONE, not counted in DATA), so an AS limit
    would cost the pool; DATA counts the memory that can actually be written.
    """
    for which, value in (
        (resource.RLIMIT_DATA, address_space_mb << 20),
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_NOFILE, open_files),
        (resource.RLIMIT_FSIZE, file_mb << 20),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(which, (value, value))


def _run(pipe: _Pipe, frame: dict[str, Any], grant: Any) -> None:
    limits = wire.limits_from(frame["limits"])
    memory: list[bytes] = []
    clock = RunClock(limits.timeout_s)
    spin_us = frame.get("spin_us")
    pipe.begin_run(
        clock, min(spin_us, 10_000) / 1e6 if type(spin_us) is int and spin_us > 0 else 0.0
    )
    handler = PipeHandler(pipe, clock)
    result = runner.run(
        frame["code"],
        grant=grant,
        handler=handler,
        limits=limits,
        memory_probe=memory.append if frame.get("probe") else None,
        clock=clock,
    )
    used = resource.getrusage(resource.RUSAGE_SELF)
    pipe.send(
        {"t": "done", "result": wire.result_fields(result), "cpu_s": used.ru_utime + used.ru_stime},
        memory[0] if memory else b"",
    )


def _escape(pipe: _Pipe, frame: dict[str, Any]) -> None:
    scope: dict[str, Any] = {"__name__": "escape"}
    try:
        exec(frame["source"], scope)  # the test-only stand-in for an escape
        result = scope.get("result")
    except BaseException as exc:
        result = {"error": f"{type(exc).__name__}: {exc}"}
    pipe.send({"t": "escaped", "result": result})


def main(argv: list[str]) -> int:
    escape_hook = "--test-escape-hook" in argv
    for arg in argv:
        if arg.startswith("--limits="):  # data MiB, CPU seconds, open files, file MiB
            data_mb, cpu_s, files, file_mb = (int(x) for x in arg.split("=", 1)[1].split(","))
            _limit_self(data_mb, cpu_s, files, file_mb)
    from runtime.sandbox.engine import get_engine

    get_engine()
    if "--seccomp" in argv:
        from runtime.tiers.syscall_filter import FilterError, install

        try:
            install()
        except FilterError as exc:
            sys.stderr.write(f"engine process: {exc}\n")
            return 3
    os.set_blocking(_IN, False)  # read when a frame is there, waited for only when not
    pipe = _Pipe()
    pipe.send({"t": "hello", "pid": os.getpid()})
    grants: dict[int, Any] = {}  # by the number the broker's side gave each
    while (item := pipe.next_order()) is not None:
        frame, _blob = item
        kind = frame["t"]
        if kind == "warm":
            for ref in frame["forget"]:
                grants.pop(ref, None)
            grant = grants[frame["ref"]] = wire.grant_from(frame["grant"])
            runner.run("", grant=grant)
            pipe.send({"t": "ready"})
        elif kind == "run" and frame["grant"] in grants:
            _run(pipe, frame, grants[frame["grant"]])
        elif kind == "escape" and escape_hook:
            _escape(pipe, frame)
        else:
            return 2
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)
