"""A profile chosen for the operator's own command, saying which of its two names is wrong.

`Grants.select` (and `run_profile`) give an unknown profile and a refused caller one
text on purpose, so a caller of a service built on them cannot learn which profile names
exist. `specgen run` and `specgen mcp` are asked by the operator, who owns the grants
file and can read it anyway, so they say which, with the profiles there are.
"""

from __future__ import annotations

from runtime.broker import Grants, Profile
from runtime.errors import GrantsError
from specgen.quoting import quoted


def select_profile(grants: Grants, name: str, caller: str) -> Profile:
    """The profile, or a GrantsError line saying which of `name` and `caller` is wrong."""
    names = grants.names()
    if name not in names:
        listed = ", ".join(quoted(n) for n in names[:10]) + (", ..." if len(names) > 10 else "")
        raise GrantsError(f"grants: {grants.path}: no profile {quoted(name)} (profiles: {listed})")
    try:
        return grants.select(name, caller)
    except GrantsError:
        if not caller or caller == "*":
            raise GrantsError(
                f'--caller {quoted(caller)}: name one principal; "*" in allowed_callers'
                " admits any caller, it is not a caller itself"
            ) from None
        raise GrantsError(
            f"grants: profile {quoted(name)}: caller {quoted(caller)} is not in its allowed_callers"
        ) from None


__all__ = ["select_profile"]
