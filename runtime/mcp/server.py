"""`specgen mcp`: agent code through a grant, as an MCP server (code mode).

A model gets three tools instead of one tool per operation: `search` finds the
operations the grant permits, `describe` gives one operation's full TypeScript types,
and `execute` runs JavaScript against the generated client in a fresh sandbox whose
calls go through the broker. A 1,200-operation API then costs the model a few hundred
tokens up front instead of its whole description.

Runs are blocking (the sandbox and broker are synchronous), so each one goes to another
thread: the grant's pool's, whose result the event loop awaits, or without a pool an
anyio worker thread. The event loop keeps serving other requests, and RUN_SLOTS bounds
how many sandboxes exist at once. At most MAX_WAITING more executes wait for a slot;
past that an execute is refused at once ("server busy"), so a client cannot queue up
work (and the request bodies it holds) without bound. A tool never raises: a failed run
is an `isError` result.

Every execute is on the record: its audit line (the one `specgen run` writes) goes to
the server's `AuditLog` whether it ran, timed out, crashed or was refused before a
sandbox started (`not_run` says why). Each execute has a trace id `mcp-<server>:<n>`,
also in its answer, so a model's transcript and the audit can be matched.
"""

import asyncio
import concurrent.futures
import contextlib
import functools
import ipaddress
import itertools
import logging
import secrets
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, NamedTuple

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field

from runtime import MAX_APPROVAL_TIMEOUT_S, telemetry
from runtime.mcp import guard, start_cache
from runtime.mcp.approval import ElicitApprover, can_elicit
from runtime.mcp.audit import AuditLog
from runtime.mcp.auth import AuthConfig, CallerVerifier, auth_settings, authenticated_caller
from runtime.mcp.round_trips import KEEP_FINISHED_S, RoundTrips, declares_form, uses_input_required
from runtime.mcp.runner import Grant, Run, Together, as_one, engine_error
from runtime.mcp.tools import Catalog, CatalogPart, execute_answer
from specgen.grant_view import GrantView, grant_description, matched
from specgen.load import read_bytes
from specgen.render import render
from specgen.version import installed_version

#: Sandboxes that may run at once; later executes wait for a slot.
RUN_SLOTS = 4
#: Executes that may wait for a slot; one more is refused at once.
MAX_WAITING = 16
#: Characters of agent code one execute accepts (as `specgen run` accepts 1 MiB).
MAX_CODE_CHARS = 1 << 20
#: The grant's full description becomes the server's instructions up to this size;
#: beyond it the model is told to search instead.
MAX_INSTRUCTIONS = 8000
MAX_SEARCH_HITS = 25

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """Everything a server needs, derived once at start-up."""

    grant: Grant
    catalog: Catalog
    instructions: str
    #: The document's title, for the instructions of a server of several APIs.
    title: str = ""
    #: The grant's allow entries that are none of the document's routes (`Derived`).
    strays: tuple[str, ...] = ()


def prepare(spec: str, grant: Grant, server: str | None = None) -> Prepared:
    """Generate the client's types from `spec` and keep what the grant permits; what an
    earlier start derived from the same document, grant and code is read back instead
    (runtime/mcp/start_cache.py)."""
    name, document = read_bytes(spec)
    view = GrantView(
        grant.name,
        grant.allow,
        grant.token_kind,
        grant.global_name,
        grant.response_headers,
        grant.route_response_headers,
    )
    slot = start_cache.slot_for(spec, grant.global_name, grant.name, document, (name, server, view))
    kept = start_cache.load(slot) if slot is not None else None
    derived = kept if isinstance(kept, Derived) else None
    if derived is None:
        derived = _derive(name, document, view, server)
        if slot is not None:
            start_cache.store(slot, derived)
    catalog = Catalog.from_parts(derived.parts)
    return Prepared(grant, catalog, derived.instructions, derived.title, derived.strays)


class Derived(NamedTuple):
    """What `prepare` derives from the document and the grant alone: what a start keeps."""

    parts: tuple[CatalogPart, ...]
    instructions: str
    title: str
    #: The allow entries (`METHOD /path`) that are none of the document's routes.
    strays: tuple[str, ...] = ()


def _derive(name: str, document: bytes, view: GrantView, server: str | None) -> Derived:
    from specgen import build as pipeline  # the pipeline only when nothing was kept

    result = pipeline.run(
        name,
        pipeline.Options(global_name=view.global_name, server=server),
        render_files=False,
        raw=document,
    )
    permitted, strays = matched(result, view.allow)
    full = grant_description(result, view, permitted)
    if len(full) <= MAX_INSTRUCTIONS:
        instructions = full
    else:
        instructions = render(
            "mcp/instructions.txt.j2",
            gen=result.gen,
            view=view,
            global_name=view.global_name,
            count=len(permitted),
        )
    parts = Catalog(permitted, result.types, view.global_name).parts
    shown = tuple(f"{entry.route.method} {entry.route.path}" for entry in strays)
    return Derived(parts, instructions, result.gen.title or "", shown)


async def ended(queued: concurrent.futures.Future[Run]) -> Run:
    """A pooled run's result, awaited on the event loop itself (asyncio, anyio's default
    backend, on which `specgen mcp` serves): the pool's thread wakes the loop when the
    run ends, where a thread of the loop's parked on the run cost two more hand-offs
    between threads per run, each a wake-up of a sleeping CPU on a virtual machine."""
    return await asyncio.wrap_future(queued)


def _text(text: str, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


#: What a caller whose token the profile's allowed_callers lacks is told (nothing of the
#: profile, the token or the list).
CALLER_REFUSED = "refused: this grant is not available to the authenticated caller"


def instructions_of(served: Sequence[Prepared]) -> str:
    """The server's instructions: one profile's own; for several, each profile's when
    they fit MAX_INSTRUCTIONS together, else a line per API and the way to search."""
    if len(served) == 1:
        return served[0].instructions
    joined = "\n\n".join(p.instructions for p in served)
    if len(joined) <= MAX_INSTRUCTIONS:
        return joined
    return render(
        "mcp/instructions_several.txt.j2",
        apis=[(p.grant.global_name, p.title, len(p.catalog)) for p in served],
    )


def build_server(
    prepared: Prepared | Sequence[Prepared],
    audit: AuditLog | None = None,
    auth: AuthConfig | None = None,
) -> MCPServer:
    """The MCP server; with `auth`, every tool runs for the caller its request's token
    names (runtime.mcp.auth) and refuses one no served profile allows.

    Given several profiles, each request's caller gets every one that allows it (all of
    them without `auth`, where start-up checked the one caller against each): one run
    has each of their clients as its own global, and search and describe cover exactly
    their operations."""
    served = (prepared,) if isinstance(prepared, Prepared) else tuple(prepared)
    everyone = as_one([p.grant for p in served])
    audit = audit if audit is not None else AuditLog()
    names = ", ".join(f"`{p.grant.global_name}`" for p in served)
    slots = anyio.CapacityLimiter(RUN_SLOTS)
    #: This server's part of every trace id, so lines of several servers sharing one
    #: audit file stay apart.
    tag = secrets.token_hex(4)
    numbers = itertools.count(1)
    admitted = 0  # executes running or waiting for a slot
    #: The joined catalog of each set of profiles a caller has been given.
    catalogs: dict[tuple[int, ...], Catalog] = {}
    trips = RoundTrips()
    server = MCPServer(
        name="plimsoll-specgen",
        version=installed_version(),
        instructions=instructions_of(served),
        log_level="WARNING",
        auth=auth_settings(auth) if auth is not None else None,
        token_verifier=CallerVerifier(auth) if auth is not None else None,
        # A parked run's state must outlive its longest question.
        request_state_security=RequestStateSecurity.ephemeral(
            ttl=MAX_APPROVAL_TIMEOUT_S + KEEP_FINISHED_S
        ),
    )

    def caller() -> tuple[str | None, tuple[int, ...]]:
        """The authenticated caller (None without auth) and the served profiles it may
        use, by position; no position when it may use none."""
        if auth is None:
            return None, tuple(range(len(served)))
        who = authenticated_caller()
        if who is None:
            return "", ()
        return who, tuple(i for i, p in enumerate(served) if p.grant.allows(who))

    def grant_of(mine: tuple[int, ...]) -> Grant | Together:
        return as_one([served[i].grant for i in mine])

    def catalog_of(mine: tuple[int, ...]) -> Catalog:
        found = catalogs.get(mine)
        if found is None:
            found = catalogs[mine] = Catalog.joined([served[i].catalog for i in mine])
        return found

    def refused(
        trace_id: str,
        reason: str,
        text: str,
        who: str | None = None,
        grant: Grant | Together = everyone,
    ) -> CallToolResult:
        audit.write(grant.not_run(trace_id, reason, caller=who))
        return _text(f"execute: {text}", is_error=True)

    async def execute(
        code: Annotated[
            str, Field(description="JavaScript to run; print results with console.log.")
        ],
        ctx: Context,
    ) -> CallToolResult | InputRequiredResult:
        nonlocal admitted
        trace_id = f"mcp-{tag}:{next(numbers)}"
        who, mine = caller()
        if not mine:
            return refused(trace_id, "caller_refused", CALLER_REFUSED, authenticated_caller())
        if ctx.request_state is not None:  # a retry carrying a held call's answer
            return await trips.resume(ctx, who)
        grant = grant_of(mine)
        if audit.failed:
            return _text(
                "execute: refused: the server's audit file cannot be written, so no run "
                "starts until the operator restarts it",
                is_error=True,
            )
        if len(code) > MAX_CODE_CHARS:
            return refused(
                trace_id, "code_too_large", f"code is over {MAX_CODE_CHARS} characters", who, grant
            )
        if admitted >= RUN_SLOTS + MAX_WAITING:
            return refused(
                trace_id,
                "busy",
                f"server busy: {RUN_SLOTS} runs going and {MAX_WAITING} waiting; "
                "try again when one has finished",
                who,
                grant,
            )
        admitted += 1
        if grant.holds_calls and uses_input_required(ctx) and declares_form(ctx):
            # No server-to-client requests on this protocol: the run is parked and its
            # questions ride input_required results (runtime.mcp.round_trips).
            return await run_parked(grant, code, trace_id, who)
        # Held calls are asked of this request's client; one that cannot be asked gets
        # them refused by the broker, with a hint saying how to enable approval.
        approver = ElicitApprover(ctx) if grant.holds_calls and can_elicit(ctx) else None
        try:
            return await run_one(grant, code, trace_id, who, approver)
        finally:
            admitted -= 1

    async def run_one(
        grant: Grant | Together,
        code: str,
        trace_id: str,
        who: str | None,
        approver: ElicitApprover | None = None,
    ) -> CallToolResult:
        try:
            await slots.acquire()
        except BaseException:  # cancelled while it waited: nothing ran
            audit.write(grant.not_run(trace_id, "cancelled", caller=who))
            raise
        try:
            # Shielded: once a sandbox runs, its result and audit line are waited for
            # even if the client cancels the request (the run cannot be stopped).
            with anyio.CancelScope(shield=True):
                try:
                    queued = grant.submit(code, trace_id, who, approver=approver)
                    if queued is not None:  # the grant's pool runs it
                        outcome: object = await ended(queued)
                    else:
                        # The approver only when there is one: a run of a grant that
                        # holds no call is the call it always was.
                        work = (
                            functools.partial(grant.run, code, trace_id, who)
                            if approver is None
                            else functools.partial(
                                grant.run, code, trace_id, who, approver=approver
                            )
                        )
                        outcome = await anyio.to_thread.run_sync(work)
                except Exception as exc:
                    outcome = exc
                return outcome_of(grant, trace_id, who, outcome)
        finally:
            slots.release()

    async def run_parked(
        grant: Grant | Together, code: str, trace_id: str, who: str | None
    ) -> CallToolResult | InputRequiredResult:
        """A run whose held calls are asked in input_required results: it goes on in a
        thread of its own across the client's retries, holding its slot until it ends."""
        nonlocal admitted
        parked = trips.open(who)
        try:
            await slots.acquire_on_behalf_of(parked)
        except BaseException:  # cancelled while it waited: nothing ran
            admitted -= 1
            audit.write(grant.not_run(trace_id, "cancelled", caller=who))
            raise

        def release() -> None:
            nonlocal admitted
            slots.release_on_behalf_of(parked)
            admitted -= 1

        trips.start(
            parked,
            lambda approver: grant.run(code, trace_id, who, approver=approver),
            lambda outcome: outcome_of(grant, trace_id, who, outcome),
            release,
        )
        return await trips.next_answer(parked)

    def outcome_of(
        grant: Grant | Together, trace_id: str, who: str | None, outcome: object
    ) -> CallToolResult:
        """A run's (or its failure's) audit line, written, and the execute's answer."""
        if isinstance(outcome, engine_error()):
            return refused(
                trace_id,
                "engine",
                f"the sandbox cannot start: {str(outcome).splitlines()[0]}",
                who,
                grant,
            )
        if isinstance(outcome, concurrent.futures.CancelledError):  # the server is stopping
            audit.write(grant.not_run(trace_id, "cancelled", caller=who))
            return _text("execute: the server is stopping; the code did not run", is_error=True)
        if not isinstance(outcome, Run):  # never raise out of a tool; never show internals
            # `specgen mcp` writes it in one line (log_lines.py), the traceback only with
            # SPECGEN_DEBUG set; an embedding application's logging decides for itself.
            log.error(
                "execute failed: internal error",
                exc_info=outcome if isinstance(outcome, BaseException) else None,
            )
            audit.write(
                grant.not_run(trace_id, type(outcome).__name__, mark="internal_error", caller=who)
            )
            return _text(
                f"execute: internal error ({type(outcome).__name__}); the run did not finish",
                is_error=True,
            )
        audit.write(outcome.audit)
        answer = execute_answer(
            outcome,
            max_calls=grant.max_calls,
            timeout_s=grant.timeout_s,
            leaks=grant.leaks,
            trace_id=trace_id,
            approval_timeout_s=grant.approval_timeout_s,
        )
        return _text(answer.text, answer.is_error)

    async def search(
        query: Annotated[str, Field(description="Words for what the code needs to do.")],
        limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_HITS)] = 8,
    ) -> CallToolResult:
        _, mine = caller()
        if not mine:
            return _text(f"search: {CALLER_REFUSED}", is_error=True)
        return _text(catalog_of(mine).search(query, limit))

    async def describe(
        operation: Annotated[
            str,
            Field(
                description=f"A method name from search, e.g. {served[0].grant.global_name}.name."
            ),
        ],
    ) -> CallToolResult:
        _, mine = caller()
        if not mine:
            return _text(f"describe: {CALLER_REFUSED}", is_error=True)
        text = catalog_of(mine).describe(operation)
        if text is None:
            return _text(
                f"describe: this grant permits no operation named {operation[:200]!r}; "
                "search() lists the permitted ones",
                is_error=True,
            )
        return _text(text)

    server.add_tool(
        execute,
        name="execute",
        description=(
            "Run JavaScript in a fresh QuickJS sandbox (no network, no files). "
            + (
                f"The global {names} is the client of the API these instructions describe; "
                if len(served) == 1
                else f"The globals {names} are the clients of the APIs these instructions "
                "describe (a caller gets those its token allows); "
            )
            + "each method "
            "returns a Promise. Every call goes to a broker outside the sandbox that checks it "
            "against the operator's grant and adds the credential itself: the key never enters "
            "the sandbox. Calls made before the code awaits run concurrently (Promise.all). "
            "Returns JSON: exit_code, timed_out, stdout, stderr, truncated, calls (method, route "
            "template and status of each call sent upstream), denied (calls the broker refused) "
            "and hints (why calls failed), and trace_id, the id of the run's audit line."
            + (
                " Calls the grant holds for a person's approval wait for their answer "
                "(asked through this client); such a call's entry in calls has approval: "
                "approved, declined, timed_out or unavailable."
                if everyone.holds_calls
                else ""
            )
        ),
        annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True),
        structured_output=False,
    )
    server.add_tool(
        search,
        name="search",
        description=(
            "Find the operations this grant permits: each hit is a client method's signature "
            f"({names}; types shortened), its route and summary, and the path values the grant "
            f"allows. {sum(len(p.catalog) for p in served)} operation(s) are permitted"
            + ("." if len(served) == 1 else " in all; a caller searches those it may use.")
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        structured_output=False,
    )
    server.add_tool(
        describe,
        name="describe",
        description=(
            "One permitted operation's full TypeScript types: parameters, request body, 2xx "
            "response, the path values the grant allows, and the named types they use."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        structured_output=False,
    )
    telemetry.instrument_mcp(server)
    return server


def security_settings(
    host: str, bound: tuple[str, int], origins: Sequence[str] = (), hosts: Sequence[str] = ()
) -> TransportSecuritySettings:
    """DNS rebinding protection for the address we serve on, whatever its spelling.

    The SDK turns its own on only for the host strings `127.0.0.1`, `localhost` and
    `::1`, and then admits any port on any of them; here the Host header must name the
    bound address and port (as given, or the address it resolved to), and a request
    carrying an Origin header is refused unless that origin was configured. `hosts` are
    further Host values admitted as given (`--allow-host`: the name clients reach the
    server by through the operator's proxy).
    """
    address, port = bound
    names = {host, address}
    for name in list(names):
        with contextlib.suppress(ValueError):
            names.add(ipaddress.ip_address(name).compressed)
    bound_hosts = {f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(bound_hosts | set(hosts)),
        allowed_origins=list(origins),
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound before the app exists so the app's Host
    check can name the port a `:0` picked. OSError when the address cannot be bound."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICSERV
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def http_app(
    server: MCPServer,
    host: str,
    sock: socket.socket,
    origins: Sequence[str] = (),
    hosts: Sequence[str] = (),
) -> guard.HttpGuard:
    """The SDK's streamable HTTP app with our bounds, behind `guard.HttpGuard`."""
    address, port = sock.getsockname()[:2]
    security = security_settings(host, (address, port), origins, hosts)
    app = server.streamable_http_app(
        transport_security=security,
        max_request_body_size=guard.MAX_MESSAGE_BYTES,
        session_idle_timeout=guard.SESSION_IDLE_S,
        # guard.HttpGuard makes room at MAX_SESSIONS; the SDK's own cap is the backstop.
        max_sessions=guard.MAX_SESSIONS + 16,
    )
    return guard.HttpGuard(app, security=security)


async def serve_http(
    server: MCPServer,
    host: str,
    port: int,
    origins: Sequence[str] = (),
    hosts: Sequence[str] = (),
) -> None:
    """Streamable HTTP on host:port (0 picks a free port); says the URL once listening."""
    import uvicorn

    sock = bind(host, port)
    config = uvicorn.Config(
        http_app(server, host, sock, origins, hosts),
        log_level="warning",
        log_config=None,  # its records go to the server's one-line log (log_lines.py)
        lifespan="on",
        # Connections and requests in flight at once, over all clients (503 past it).
        limit_concurrency=4 * guard.MAX_SESSIONS,
    )
    web = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve, [sock])
        while not web.started:
            if web.should_exit:
                return
            await anyio.sleep(0.02)
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"specgen: MCP server on http://{shown}:{bound}/mcp\n")
        sys.stderr.flush()


async def serve_stdio(server: MCPServer, on_interrupt: Callable[[], None] = lambda: None) -> bool:
    """stdio as the SDK serves it, with stdin read in bounded lines and the session's
    request ids checked (`guard`), until stdin closes or Ctrl-C; True after Ctrl-C.

    Ctrl-C calls `on_interrupt` (which ends the runs going on) and stops serving once
    every execute under way has its answer and audit line; a second Ctrl-C raises
    KeyboardInterrupt at once. The SDK alone would cancel its task and leave, but only
    after each shielded run's own timeout, and the thread reading stdin would then keep
    the process alive until the client closed it."""
    low = server._lowlevel_server  # the SDK's own run_stdio_async does the same
    interrupted = False
    serving = anyio.CancelScope()

    async def watch() -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if interrupted:
                    raise KeyboardInterrupt
                interrupted = True
                on_interrupt()
                serving.cancel()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        with serving:
            async with (
                stdio_server(stdin=guard.BoundedStdin()) as (read, write),  # type: ignore[arg-type]
                guard.guard_streams(read, write) as (guarded_read, guarded_write),
            ):
                await low.run(guarded_read, guarded_write, low.create_initialization_options())
        tasks.cancel_scope.cancel()
    return interrupted
