"""What a run given one profile or several needs from each room, composed in one place.

Every entry point that runs code (`run_with_grant`, the isolated tiers' `run_isolated`,
the pool) takes a `Profile` or a tuple of them. With one, nothing changes: one guest
grant, one `Broker`, the audit line naming it. With several, the sandbox gets one client
per profile (each its own global and preamble), the host calls go to a `BrokerSet`
(one broker per profile, chosen by the global that made the call) and the audit line
names every profile. Like `session.py`, this module may see both rooms; they never see
each other.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from runtime import sandbox
from runtime.broker import Broker, Profile
from runtime.broker.several import BrokerSet, check_globals
from runtime.errors import RunInputError

#: One profile, or the several profiles of one run (one grants file's).
Profiles: TypeAlias = Profile | tuple[Profile, ...]


def as_profiles(profile: object) -> tuple[Profile, ...]:
    """The run's profiles as a tuple; a wrong type, none, or two on one global is refused."""
    many = tuple(profile) if isinstance(profile, list | tuple) else (profile,)
    if not many:
        raise RunInputError("a run needs at least one profile")
    for each in many:
        if not isinstance(each, Profile):
            raise RunInputError(f"profile must be a Profile, not {type(each).__name__}")
    check_globals(many)
    return many


def guest_grant(
    profiles: tuple[Profile, ...],
) -> sandbox.GuestGrant | tuple[sandbox.GuestGrant, ...]:
    """What the guest sees: each profile's global, allow list and preamble; never a key."""
    grants = tuple(
        sandbox.GuestGrant(global_name=p.global_name, allow=p.allow, preamble=p.preamble)
        for p in profiles
    )
    return grants[0] if len(grants) == 1 else grants


def open_broker(profiles: tuple[Profile, ...], **options: Any) -> Broker | BrokerSet:
    """The run's host call handler: the profile's broker, or one per profile."""
    if len(profiles) == 1:
        return Broker(profiles[0], **options)
    return BrokerSet(profiles, **options)


def audit_name(profiles: tuple[Profile, ...]) -> str | tuple[str, ...]:
    """What `audit_line` takes: the one name, or every name (runtime/broker/trace.py)."""
    return profiles[0].name if len(profiles) == 1 else tuple(p.name for p in profiles)


def run_name(profiles: tuple[Profile, ...]) -> str:
    """The run's profile as telemetry names it: the audit line's `profile` text."""
    return ",".join(p.name for p in profiles)


def total_calls(profiles: tuple[Profile, ...]) -> int:
    """Calls the run's brokers may take together (each keeps its own budget)."""
    return sum(p.max_calls for p in profiles)
