"""A wall clock for the service that runs ahead on demand: leases, delays, deadlines and dedup
windows end without a test waiting for them."""

from __future__ import annotations

import pkgutil
from importlib import import_module

import django_fdbqueue.service
from django_fdbqueue.service import records


def _readers_of_the_clock() -> tuple[object, ...]:
    """Every service module that reads the wall clock through ``records.now_micros``, found by
    looking, so a module split or added is not left on the real clock."""
    names = pkgutil.walk_packages(django_fdbqueue.service.__path__, "django_fdbqueue.service.")
    modules = [import_module(info.name) for info in names]
    return tuple(m for m in modules if getattr(m, "now_micros", None) is records.now_micros and m is not records)


class Clock:
    """``now_micros`` of every service module that reads the wall clock, plus ``ahead_us``."""

    MODULES = _readers_of_the_clock()

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
        base = records.now_micros()
        for module in self.MODULES:
            monkeypatch.setattr(module, "now_micros", lambda: base + self.ahead_us)
