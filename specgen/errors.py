"""The one exception the generator raises for input it refuses.

Every refusal is a single line that names what was refused and why; the CLI prints it
and exits 1, so a user never sees a traceback for bad input.
"""

from __future__ import annotations

from specgen.quoting import capped, visible


class SpecError(Exception):
    """A refusal of the input; `str()` is the complete one-line message.

    `notes` are lines printed before it (each skip reason, when nothing was left to
    generate), so the refusal itself stays one line.

    Messages quote document text where they name it; `visible` is the net under that:
    whatever a message or note was built from, no control or invisible character (an
    ESC that starts a terminal sequence, a bidi override) reaches the terminal raw.
    """

    def __init__(self, message: str, notes: tuple[str, ...] = ()) -> None:
        super().__init__(capped(visible(message.splitlines()[0])) if message else message)
        self.notes = tuple(capped(visible(note)) for note in notes)
