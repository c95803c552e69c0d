"""What the wall tests look with from outside an engine process: its process tree and
every byte of memory each of those processes can read (root reads /proc/PID/mem)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def process_tree(pid: int) -> list[int]:
    """`pid` and every descendant (bwrap, runsc and its sandbox, the engine itself)."""
    seen: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return seen


def memory_count(pids: list[int], needles: list[bytes], *, max_region: int = 8 << 30) -> int:
    """Occurrences of any needle in the readable memory of every process in `pids`.

    Regions are read in pieces, each overlapping the last by the longest needle, so a
    needle cut across two pieces is still found once.
    """
    overlap = max(len(n) for n in needles) - 1
    hits = 0
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
            mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
        except OSError:
            continue
        try:
            for line in maps:
                span, perms = line.split()[:2]
                if perms[0] != "r":
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                if end - start > max_region:
                    continue
                hits += _count_region(mem, start, end, needles, overlap)
        finally:
            os.close(mem)
    return hits


def _count_region(mem: int, start: int, end: int, needles: list[bytes], overlap: int) -> int:
    hits, tail, offset = 0, b"", start
    while offset < end:
        try:
            chunk = os.pread(mem, min(16 << 20, end - offset), offset)
        except OSError:
            return hits
        if not chunk:
            return hits
        window = tail + chunk
        hits += sum(window.count(n) for n in needles)
        # What the next window re-reads must not be counted twice: keep only a tail
        # shorter than any needle.
        tail = window[-overlap:] if overlap else b""
        hits -= sum(tail.count(n) for n in needles)
        offset += len(chunk)
    return hits
