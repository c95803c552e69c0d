"""Approvals over MCP: the client's person answers a form elicitation for each held call.

The broker holds a call the grant marks `approve` and asks its approver; in the MCP
server that approver runs on a run's thread (or a pool's dispatching thread) and asks
the execute request's client with the SDK's form elicitation (`Context.elicit`), on
the server's event loop, bounded by the grant's approval timeout. The form has two
booleans: approve, and approve every later call of the same route in this run. A
client that did not declare the elicitation capability gets no approver at all, so the
broker refuses the held calls (and the execute answer's hint says how to enable it).

The answer comes from the client, which is where the person is; the guest, whose code
is running, has no path to it: the form is sent by the server on the MCP session,
never through the sandbox, and the broker acts only on this channel's answer.
"""

from __future__ import annotations

import anyio
import anyio.from_thread
import anyio.lowlevel
from mcp.server.mcpserver import AcceptedElicitation, Context
from mcp.shared.exceptions import NoBackChannelError
from mcp.types import ClientCapabilities, ElicitationCapability
from pydantic import BaseModel, ConfigDict, Field

from runtime import Answer, CannotAsk, Question


class Decision(BaseModel):
    """The form a person fills in (primitive fields only, as form elicitation allows)."""

    # Strict: only JSON booleans count (lax validation takes "yes", "true" or 1 for an
    # approval). An answer that is not the form's schema fails validation in the SDK,
    # and the broker's gate counts a failing channel as a no. This is a comment, not
    # the docstring, which the SDK sends to the client as the form's description.
    model_config = ConfigDict(strict=True)

    approve: bool = Field(description="Send exactly this request")
    whole_run: bool = Field(
        default=False,
        description="Also send every later call of this route in this run without asking",
    )


def can_elicit(ctx: Context) -> bool:
    """Did the client declare form elicitation (the capability, which implies form)?"""
    try:
        session = ctx.session
        return bool(
            session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability()))
        )
    except Exception:
        return False


class ElicitApprover:
    """Asks the execute request's client, from a thread, on the server's event loop."""

    channel = "mcp-elicitation"

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._token = anyio.lowlevel.current_token()  # made on the event loop's thread

    def __call__(self, question: Question, timeout_s: float) -> Answer | None:
        return anyio.from_thread.run(self._ask, question, timeout_s, token=self._token)

    async def _ask(self, question: Question, timeout_s: float) -> Answer | None:
        with anyio.move_on_after(timeout_s) as waiting:
            _ASKING.add(waiting)
            try:
                result = await self._ctx.elicit(question.text(), Decision)
            except NoBackChannelError:
                raise CannotAsk from None
            finally:
                _ASKING.discard(waiting)
            if isinstance(result, AcceptedElicitation) and result.data.approve:
                return Answer.ALWAYS if result.data.whole_run else Answer.YES
            return Answer.NO
        return None


#: The questions waiting for a client's answer now, for `end_asking`; each is added and
#: removed on the event loop's thread, where `end_asking` runs too.
_ASKING: set[anyio.CancelScope] = set()


def end_asking() -> None:
    """The server is stopping (Ctrl-C): every question waiting for a client ends now
    unanswered, as at its timeout, so its held call is refused and its run (whose clock
    was ended too) ends and writes its audit line, instead of waiting out the grant's
    approval timeout. Call on the event loop."""
    for waiting in list(_ASKING):
        waiting.cancel()


__all__ = ["Decision", "ElicitApprover", "can_elicit", "end_asking"]
