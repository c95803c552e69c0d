"""`specgen mcp`: agent code through a grant, as an MCP server (code mode).

A model gets three tools instead of one tool per operation: `search` finds the
operations the grant permits, `describe` gives one operation's full TypeScript types,
and `execute` runs JavaScript against the generated client in a fresh sandbox whose
calls go through the broker. A 1,200-operation API then costs the model a few hundred
tokens up front instead of its whole description.

Runs are blocking (the sandbox and broker are synchronous), so each one goes to a worker
thread; the event loop keeps serving other requests, and RUN_SLOTS bounds how many
sandboxes exist at once. A tool never raises: a failed run is an `isError` result.
"""

import logging
from dataclasses import dataclass
from typing import Annotated

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from runtime.mcp.runner import Grant, engine_error
from runtime.mcp.tools import Catalog, execute_answer
from specgen import build as pipeline
from specgen.grant_view import GrantView, allowed, grant_description
from specgen.render import render

#: Sandboxes that may run at once; later executes wait for a slot.
RUN_SLOTS = 4
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


def prepare(spec: str, grant: Grant, server: str | None = None) -> Prepared:
    """Generate the client's types from `spec` and keep what the grant permits."""
    result = pipeline.run(spec, pipeline.Options(global_name=grant.global_name, server=server))
    view = GrantView(grant.name, grant.allow, "static" if grant.has_key else "", grant.global_name)
    permitted = allowed(result, view.allow)
    full = grant_description(result, view)
    if len(full) <= MAX_INSTRUCTIONS:
        instructions = full
    else:
        instructions = render(
            "mcp/instructions.txt.j2",
            gen=result.gen,
            view=view,
            global_name=grant.global_name,
            count=len(permitted),
        )
    catalog = Catalog(permitted, result.types, grant.global_name)
    return Prepared(grant, catalog, instructions)


def _text(text: str, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def build_server(prepared: Prepared) -> MCPServer:
    grant, catalog = prepared.grant, prepared.catalog
    g = grant.global_name
    slots = anyio.CapacityLimiter(RUN_SLOTS)
    server = MCPServer(
        name="plimsoll-specgen",
        instructions=prepared.instructions,
        log_level="WARNING",
    )

    async def execute(
        code: Annotated[
            str, Field(description="JavaScript to run; print results with console.log.")
        ],
    ) -> CallToolResult:
        if len(code) > MAX_CODE_CHARS:
            return _text(f"execute: code is over {MAX_CODE_CHARS} characters", is_error=True)
        try:
            run = await anyio.to_thread.run_sync(grant.run, code, limiter=slots)
        except engine_error() as exc:
            return _text(f"execute: the sandbox cannot start: {str(exc).splitlines()[0]}", True)
        except Exception as exc:  # never raise out of a tool; never show internals
            log.exception("execute failed")
            return _text(
                f"execute: internal error ({type(exc).__name__}); the run did not finish", True
            )
        answer = execute_answer(
            run, max_calls=grant.max_calls, timeout_s=grant.timeout_s, leaks=grant.leaks
        )
        return _text(answer.text, answer.is_error)

    async def search(
        query: Annotated[str, Field(description="Words for what the code needs to do.")],
        limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_HITS)] = 8,
    ) -> str:
        return catalog.search(query, limit)

    async def describe(
        operation: Annotated[str, Field(description=f"A method name from search, e.g. {g}.name.")],
    ) -> CallToolResult:
        text = catalog.describe(operation)
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
            f"The global `{g}` is the client of the API these instructions describe; each method "
            "returns a Promise. Every call goes to a broker outside the sandbox that checks it "
            "against the operator's grant and adds the credential itself: the key never enters "
            "the sandbox. Calls made before the code awaits run concurrently (Promise.all). "
            "Returns JSON: exit_code, timed_out, stdout, stderr, truncated, calls (method, route "
            "template and status of each call sent upstream), denied (calls the broker refused) "
            "and hints (why calls failed)."
        ),
        annotations=ToolAnnotations(read_only_hint=False, open_world_hint=True),
        structured_output=False,
    )
    server.add_tool(
        search,
        name="search",
        description=(
            f"Find the operations this grant permits: each hit is a `{g}.` method's signature "
            "(types shortened), its route and summary, and the path values the grant allows. "
            f"{len(catalog)} operation(s) are permitted."
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
    return server


async def serve_http(server: MCPServer, host: str, port: int) -> None:
    """Streamable HTTP on host:port (0 picks a free port); says the URL once listening."""
    import sys

    import uvicorn

    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(web.serve)
        while not web.started:
            if web.should_exit:
                return
            await anyio.sleep(0.02)
        bound = web.servers[0].sockets[0].getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        sys.stderr.write(f"specgen: MCP server on http://{shown}:{bound}/mcp\n")
        sys.stderr.flush()
