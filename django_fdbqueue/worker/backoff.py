"""How long to wait before trying again: after a failed item, and after a store error.

Two different waits, on purpose. A failed item is released with a delay that grows with its
``attempts`` (kept by the store, so it survives worker restarts and holds across every worker of
the queue). A store error is the worker's own affair: a small, bounded, in-memory back-off that
starts over after the next success. Both are jittered, so that workers which failed together do
not all come back at the same instant and fail together again.
"""

from __future__ import annotations

import math
import random
from typing import Callable

__all__ = ["retry_delay", "Backoff"]

# 2.0 ** 1024 overflows a float; far beyond any cap anyway.
_MAX_EXPONENT = 60


def retry_delay(
    attempts: int,
    *,
    base: float = 1.0,
    maximum: float = 300.0,
    jitter: float = 0.5,
    random_fraction: Callable[[], float] = random.random,
) -> float:
    """Seconds to hide an item that failed on its ``attempts``-th claim before it comes back.

    ``base * 2 ** (attempts - 1)``, capped at ``maximum``, then shortened by up to ``jitter`` of
    itself (0.5: somewhere between half and all of it). The first failure waits about ``base``.
    """
    if maximum <= 0 or base <= 0:
        return 0.0
    exponent = min(max(attempts, 1) - 1, _MAX_EXPONENT)
    delay = min(maximum, base * 2.0**exponent)
    jitter = min(max(jitter, 0.0), 1.0)
    return max(0.0, delay * (1.0 - jitter * random_fraction()))


class Backoff:
    """A growing pause between retries of an operation that keeps failing; ``reset`` after a success.

    Not thread-safe: each worker thread keeps its own.
    """

    def __init__(
        self,
        *,
        initial: float = 0.1,
        maximum: float = 10.0,
        jitter: float = 0.5,
        random_fraction: Callable[[], float] = random.random,
    ) -> None:
        if not (math.isfinite(initial) and math.isfinite(maximum)) or initial <= 0 or maximum < initial:
            raise ValueError("Backoff needs 0 < initial <= maximum, both finite.")
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self._random = random_fraction
        self.failures = 0

    def next(self) -> float:
        """Count one more failure and return how long to pause before the next try."""
        self.failures += 1
        return retry_delay(
            self.failures, base=self.initial, maximum=self.maximum, jitter=self.jitter, random_fraction=self._random
        )

    def reset(self) -> None:
        """The operation worked: the next failure starts from ``initial`` again."""
        self.failures = 0
