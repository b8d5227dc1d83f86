"""Progress on standard error while the bench runs: a live bar on a terminal, plain lines otherwise.

On a terminal one line is redrawn in place (the bar, the row being measured, fill progress); in
a log (CI, a pipe, ``call_command`` capturing the stream) every finished row is one line, so the
log reads as a record and carries no carriage returns.
"""

from __future__ import annotations

import shutil
import time
from typing import Callable

__all__ = ["Progress"]

_BAR_WIDTH = 24
_REDRAW_SECONDS = 0.2


class Progress:
    """Tell the user how far the run is: ``start`` a row, maybe ``detail`` it, ``done`` it."""

    def __init__(self, write: Callable[[str], None], total: int, *, live: bool) -> None:
        self._write = write
        self._total = max(total, 1)
        self._live = live
        self._done = 0
        self._label = ""
        self._detail = ""
        self._drawn_at = 0.0

    def start(self, label: str) -> None:
        self._label = label
        self._detail = ""
        self._draw(force=True)

    def detail(self, text: str) -> None:
        """A changing detail of the current step (fill progress); shown on a terminal only."""
        self._detail = text
        self._draw()

    def done(self, summary: str) -> None:
        self._done += 1
        if self._live:
            self._detail = ""
            self._draw(force=True)
        else:
            self._write(f"[{self._done}/{self._total}] {summary}\n")

    def note(self, text: str) -> None:
        """A message that stays (a server started, a warning), above the bar on a terminal."""
        if self._live:
            self._write("\r\x1b[K" + text + "\n")
            self._draw(force=True)
        else:
            self._write(text + "\n")

    def close(self) -> None:
        if self._live:
            self._write("\r\x1b[K")

    def _draw(self, force: bool = False) -> None:
        if not self._live:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < _REDRAW_SECONDS:
            return
        self._drawn_at = now
        filled = round(_BAR_WIDTH * self._done / self._total)
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        text = f"[{bar}] {self._done}/{self._total}  {self._label}"
        if self._detail:
            text += f"  {self._detail}"
        width = shutil.get_terminal_size((100, 24)).columns - 1
        self._write("\r\x1b[K" + text[:width])
