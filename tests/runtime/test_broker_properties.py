"""Properties of the route decision the broker relies on (hypothesis)."""

from __future__ import annotations

import functools
import string

from hypothesis import event, given, settings
from hypothesis import strategies as st

from runtime import Broker, HostRequest, Profile
from specgen.routes import METHODS, Route, first_match, pattern_error, target_allowed

UNRESERVED = string.ascii_letters + string.digits + "-._~"
WIRE = UNRESERVED + "$&+,:;=@"

literal = st.text(alphabet=WIRE, min_size=1, max_size=8).filter(
    lambda s: pattern_error("/" + s) is None
)
segment = st.one_of(st.just("*"), literal)
pattern = st.lists(segment, min_size=0, max_size=6).map(lambda segs: "/" + "/".join(segs))
valid_pattern = pattern.filter(lambda p: pattern_error(p) is None)
method = st.sampled_from(METHODS)
allow_list = st.lists(st.builds(Route, path=valid_pattern, method=method), min_size=1, max_size=5)

# Targets: mostly near-misses built from allowed pieces plus arbitrary junk.
piece = st.one_of(
    st.text(alphabet=WIRE + "%/?#\\ *.é\r\n\x00", min_size=0, max_size=10),
    st.sampled_from(["x", "..", ".", "", "%2e", "a;b", "*", "ab", "items"]),
)
target = st.one_of(
    st.lists(piece, min_size=0, max_size=6).map(lambda segs: "/" + "/".join(segs)),
    st.text(max_size=30),
)
any_method = st.one_of(
    method, st.sampled_from(["get", "post", "HEAD", "poſt", "GET ", ""]), st.text(max_size=6)
)


def _canonical(path: str) -> bool:
    return (
        path.startswith("/")
        and all(ch in WIRE + "/" for ch in path)
        and all(
            seg not in ("", ".", "..") and seg.strip(".") != "" and ";" not in seg
            for seg in path.split("/")[1:]
        )
    ) or path == "/"


@st.composite
def instance_of(draw: st.DrawFn, allow: list[Route] | tuple[Route, ...]) -> tuple[str, str]:
    """A call derived from one allow entry: its verb (or a near miss) and its pattern with
    each `*` filled by a segment that is usually, but not always, unreserved."""
    entry = draw(st.sampled_from(allow))
    unreserved = st.text(alphabet=UNRESERVED, min_size=1, max_size=8)
    # one character a wildcard must not stand for, between unreserved ones (or "", ".", "..")
    near_miss = st.one_of(
        st.builds(
            "".join,
            st.tuples(
                st.text(alphabet=UNRESERVED, max_size=3),
                st.sampled_from([*"$&+,:;=@*%/?#\\ é"]),
                st.text(alphabet=UNRESERVED, max_size=3),
            ),
        ),
        st.sampled_from(["", ".", ".."]),
    )
    segs = [
        draw(unreserved if draw(st.integers(0, 3)) else near_miss) if seg == "*" else seg
        for seg in entry.path.split("/")[1:]
    ]
    verb = entry.method if draw(st.integers(0, 3)) else draw(any_method)
    return verb, "/" + "/".join(segs)


@st.composite
def allow_and_call(draw: st.DrawFn) -> tuple[list[Route], str, str]:
    allow = draw(allow_list)
    derived = draw(st.booleans())
    m, path = draw(instance_of(allow) if derived else st.tuples(any_method, target))
    return allow, m, path


def test_an_approved_call_is_canonical_and_an_instance_of_an_allow_entry() -> None:
    approved: list[Route] = []

    @settings(max_examples=400, deadline=None)
    @given(case=allow_and_call())
    def check(case: tuple[list[Route], str, str]) -> None:
        allow, m, path = case
        route = first_match(allow, m, path)
        event("approved" if route is not None else "refused")
        if route is None:
            return
        approved.append(route)
        assert m.isascii() and m.upper() == route.method
        assert target_allowed(path) and _canonical(path)
        assert "%" not in path and "?" not in path and "#" not in path and "\\" not in path
        segs, want = path.split("/")[1:], route.path.split("/")[1:]
        assert len(segs) == len(want)
        for w, g in zip(want, segs, strict=True):
            assert g == w or (w == "*" and g and all(ch in UNRESERVED for ch in g))

    check()
    # The property says something only about approved calls: it must have seen many.
    assert len(approved) >= 50, f"only {len(approved)} of 400 examples were approved"


@settings(max_examples=300, deadline=None)
@given(p=valid_pattern, m=method)
def test_every_valid_pattern_admits_its_own_instantiation(p: str, m: str) -> None:
    instance = p.replace("*", "x")
    assert first_match([Route(p, m)], m, instance) == Route(p, m)


_ALLOW = (Route("/v1/items/*", "GET"), Route("/x", "POST"))


@functools.cache
def _broker() -> Broker:
    """One session for all examples (a client per example costs an SSL context each)."""
    grant = Profile(
        name="p",
        base_url="https://unreachable.invalid",
        global_name="h",
        allowed_callers=("*",),
        allow=_ALLOW,
        max_calls=100000,
    )
    b = Broker(grant)
    b._channel.send = _explode  # type: ignore[method-assign]
    return b


def test_the_broker_never_sends_what_the_rules_refuse() -> None:
    """A refused target gets a 403 without the HTTP client being touched."""
    outcomes = {"sent": 0, "refused": 0}

    @settings(max_examples=200, deadline=None)
    @given(derived=st.booleans(), data=st.data())
    def check(derived: bool, data: st.DataObject) -> None:
        m, path = data.draw(instance_of(_ALLOW) if derived else st.tuples(any_method, target))
        reply = _broker()(HostRequest(m, path, None))
        if first_match(_ALLOW, m, path) is None:
            assert reply.status == 403
            outcomes["refused"] += 1
        else:
            assert reply.status == 502  # it was sent (to the exploding client)
            outcomes["sent"] += 1

    check()
    assert outcomes["sent"] >= 10 and outcomes["refused"] >= 10, outcomes


def _explode(*args: object, **kwargs: object) -> object:
    raise RuntimeError("sent")
