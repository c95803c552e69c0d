"""The one contract between the sandbox and whatever answers its host calls.

The sandbox knows nothing about grants, keys or HTTP; the broker knows nothing about
WebAssembly. They meet here: the guest's envelope is decoded by the sandbox into a
method, a target and the raw JSON bytes of the body, and the answer is a status and
bytes. Keeping the reply this small is deliberate: no header of the upstream response
other than a sanitised content type can ever reach guest code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class HostReply:
    """What the guest gets back from one host call."""

    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


class HostHandler(Protocol):
    """Answers one host call synchronously; the guest is blocked meanwhile.

    `body` is the exact JSON text the guest sent as the envelope's `body` (None when
    the envelope had no body), so what the broker approves is what it forwards.
    """

    def __call__(self, method: str, path: str, body: bytes | None) -> HostReply: ...
