"""A wall clock for the service that runs ahead on demand: leases, delays, deadlines and dedup
windows end without a test waiting for them."""

from __future__ import annotations

from django_fdbqueue.service import pushing
from django_fdbqueue.service._internals import contention, dedup, items, leases, settled, waiting


class Clock:
    """``now_micros`` of every service module that reads the wall clock, plus ``ahead_us``."""

    MODULES = (items, leases, waiting, dedup, contention, pushing, settled)

    def __init__(self, monkeypatch) -> None:
        self.ahead_us = 0
        for module in self.MODULES:
            real = module.now_micros
            monkeypatch.setattr(module, "now_micros", lambda real=real: real() + self.ahead_us)

    def advance(self, seconds: float) -> None:
        self.ahead_us += int(seconds * 1e6)


class StillClock(Clock):
    """The same clock standing still but for ``advance``: a lease ends only when the test says,
    however slowly a loaded machine runs the threads that keep it."""

    def __init__(self, monkeypatch) -> None:
        self.ahead_us = 0
        base = items.now_micros()
        for module in self.MODULES:
            monkeypatch.setattr(module, "now_micros", lambda: base + self.ahead_us)
