"""IdentityMemo (runtime/identity_memo.py): a value per set of objects, never another's."""

from __future__ import annotations

from runtime.identity_memo import IdentityMemo


def test_the_same_objects_get_the_value_made_once() -> None:
    memo: IdentityMemo[str] = IdentityMemo(4)
    allow, preamble = ("GET /a",), "x" * 10
    made: list[int] = []
    first = memo.get((allow, preamble), lambda: made.append(1) or "v")
    assert memo.get((allow, preamble), lambda: made.append(2) or "w") is first
    assert made == [1]


def test_equal_objects_that_are_not_the_same_get_their_own_value() -> None:
    memo: IdentityMemo[int] = IdentityMemo(4)
    a, b = tuple([1, 2]), tuple([1, 2])
    assert a == b and a is not b
    assert memo.get((a,), lambda: 1) == 1
    assert memo.get((b,), lambda: 2) == 2


def test_it_keeps_the_most_recently_used_and_never_mixes_reused_ids() -> None:
    memo: IdentityMemo[int] = IdentityMemo(2)
    kept = tuple(["kept"])
    memo.get((kept,), lambda: -1)
    for i in range(50):  # fresh objects: ids of dropped ones come back for new ones
        part = tuple([i])
        assert memo.get((part,), lambda i=i: i) == i
        assert memo.get((kept,), lambda: 0) == -1  # used last each time, so kept
    assert len(memo) == 2
