"""A wall clock for the service that runs ahead on demand: leases, delays, deadlines and dedup
windows end without a test waiting for them."""

from __future__ import annotations

from django_fdbqueue.service import contention, dedup, items, leases, pushing, waiting


class Clock:
    """``now_micros`` of every service module that reads the wall clock, plus ``ahead_us``."""

    MODULES = (items, leases, waiting, dedup, contention, pushing)

    def __init__(self, monkeypatch) -> None:
        self.ahead_us = 0
        for module in self.MODULES:
            real = module.now_micros
            monkeypatch.setattr(module, "now_micros", lambda real=real: real() + self.ahead_us)

    def advance(self, seconds: float) -> None:
        self.ahead_us += int(seconds * 1e6)
