"""One run, several profiles: each profile's broker decides the calls of its own global.

A run given `github` and `stripe` has two clients in its sandbox, `github.*` and
`stripe.*`, and here one `Broker` per profile: its own policy, budget, caps, breaker
and credential. Each host call names the global whose client made it
(`HostRequest.client`); `BrokerSet` hands it to that profile's broker and to no other.
The guest can write any name there, so a forged name reaches only another profile the
run was given, whose own grant then decides the call with its own credential; a name
no profile of the run has (or none) is refused, never guessed.

The brokers write one trace through their own views (`ProfileTrace`), so the run's
record keeps one sequence of calls in the guest's order with each row naming its profile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from runtime.broker.grants import Profile
from runtime.broker.handler import Broker, refusal
from runtime.broker.trace import CallTrace, ProfileTrace, TraceSnapshot
from runtime.contract import HostReply, HostRequest
from runtime.errors import GrantsError
from runtime.refusals import RULES, guest_text


def check_globals(profiles: Sequence[Profile]) -> None:
    """Each profile once, each with its own global (two profiles on one global would be
    one client): refused in one line otherwise."""
    names: set[str] = set()
    owners: dict[str, str] = {}
    for profile in profiles:
        if profile.name in names:
            raise GrantsError(f'profile "{profile.name}" is given twice')
        names.add(profile.name)
        other = owners.setdefault(profile.global_name, profile.name)
        if other != profile.name:
            raise GrantsError(
                f'profiles "{other}" and "{profile.name}" both use the global '
                f'"{profile.global_name}"; a run of several profiles needs distinct globals'
            )


class BrokerSet:
    """The host call handler of a run given several profiles: one broker per global."""

    def __init__(self, profiles: Sequence[Profile], **options: Any) -> None:
        check_globals(profiles)
        self.trace = CallTrace()
        self._brokers: dict[str, Broker] = {}
        try:
            for profile in profiles:
                self._brokers[profile.global_name] = Broker(
                    profile, trace=ProfileTrace(self.trace, profile.name), **options
                )
        except BaseException:
            for broker in self._brokers.values():
                broker.close()
            raise

    def _broker(self, call: HostRequest) -> Broker | None:
        return self._brokers.get(call.client) if call.client is not None else None

    def _unknown(self) -> HostReply:
        self.trace.deny("route_not_granted")
        return refusal(RULES["route_not_granted"].status, guest_text("route_not_granted"))

    def __call__(self, call: HostRequest) -> HostReply:
        broker = self._broker(call)
        return broker(call) if broker is not None else self._unknown()

    def start(self, call: HostRequest) -> Callable[[], HostReply]:
        broker = self._broker(call)
        if broker is None:
            return functools.partial(_answered, self._unknown())
        return broker.start(call)

    def close(self) -> TraceSnapshot:
        """End every profile's session; the one trace holds all their calls."""
        for broker in self._brokers.values():
            try:
                broker.close()
            except Exception:
                continue
        return self.trace.snapshot()

    @property
    def calls(self) -> int:
        """Calls counted against the budgets so far, every profile's together."""
        return sum(broker.calls for broker in self._brokers.values())

    def __repr__(self) -> str:
        return f"BrokerSet(globals={sorted(self._brokers)!r}, calls={self.calls})"


def _answered(reply: HostReply) -> HostReply:
    return reply


__all__ = ["BrokerSet", "check_globals"]
