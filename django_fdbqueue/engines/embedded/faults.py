"""Fault injection for the embedded engine: make a chosen fraction of commits fail.

FoundationDB clients must survive two kinds of commit failure, and tests should prove they do:

- ``not_committed`` (1020): the commit lost a conflict; nothing was written.
- ``commit_unknown_result`` (1021): the client cannot tell whether the commit happened. Both
  real outcomes are injectable: ``unknown_applied`` (it did happen: a blind retry applies the
  work twice) and ``unknown_not_applied`` (it did not).
"""

from __future__ import annotations

import collections
import random
import threading
from dataclasses import dataclass
from typing import Any, Mapping

NOT_COMMITTED = "not_committed"
UNKNOWN_APPLIED = "unknown_applied"
UNKNOWN_NOT_APPLIED = "unknown_not_applied"
KINDS = (NOT_COMMITTED, UNKNOWN_APPLIED, UNKNOWN_NOT_APPLIED)


@dataclass(frozen=True)
class FaultConfig:
    """Fractions (0..1) of commits that fail each way; their sum must not exceed 1."""

    not_committed: float = 0.0
    unknown_applied: float = 0.0
    unknown_not_applied: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        for kind in KINDS:
            fraction = getattr(self, kind)
            if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
                raise TypeError("fault fraction %s must be a number, not %r" % (kind, fraction))
            if not 0.0 <= fraction <= 1.0:
                raise ValueError("fault fraction %s must be between 0 and 1, not %r" % (kind, fraction))
        if sum(getattr(self, kind) for kind in KINDS) > 1.0 + 1e-9:
            raise ValueError("fault fractions add up to more than 1")

    @classmethod
    def from_value(cls, value: "FaultConfig | Mapping[str, Any] | None") -> "FaultConfig":
        if value is None:
            return cls()
        if isinstance(value, FaultConfig):
            return value
        unknown = set(value) - set(KINDS) - {"seed"}
        if unknown:
            raise ValueError(
                "unknown fault setting(s) %s; expected %s or seed" % (", ".join(sorted(unknown)), ", ".join(KINDS))
            )
        return cls(**dict(value))


class FaultInjector:
    """Decides, commit by commit, whether (and how) to fail it. Thread-safe."""

    def __init__(self, config: FaultConfig | Mapping[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self.configure(**_as_kwargs(config))

    def configure(
        self,
        not_committed: float = 0.0,
        unknown_applied: float = 0.0,
        unknown_not_applied: float = 0.0,
        seed: int | None = None,
    ) -> None:
        """Replace the fault fractions (all zero: no faults)."""
        config = FaultConfig(not_committed, unknown_applied, unknown_not_applied, seed)
        with self._lock:
            self.config = config
            self._random = random.Random(seed)
            self.injected = {kind: 0 for kind in KINDS}
            self._scheduled: collections.deque[str] = collections.deque()

    def disable(self) -> None:
        self.configure()

    def fail_next(self, *kinds: str) -> None:
        """Fail the next commits in this order, one kind each, before any random draw.

        For tests that need one exact fault at one exact commit (say, ``unknown_applied`` on a
        create) rather than a fraction of all commits.
        """
        unknown = [kind for kind in kinds if kind not in KINDS]
        if unknown:
            raise ValueError("unknown fault kind(s) %s; expected %s" % (", ".join(unknown), ", ".join(KINDS)))
        with self._lock:
            self._scheduled.extend(kinds)

    @property
    def active(self) -> bool:
        return bool(self._scheduled) or any(getattr(self.config, kind) for kind in KINDS)

    def draw(self) -> str | None:
        """The fault to inject into the next commit, or None to let it through."""
        if not self.active:
            return None
        with self._lock:
            if self._scheduled:
                kind = self._scheduled.popleft()
                self.injected[kind] += 1
                return kind
            roll = self._random.random()
            for kind in KINDS:
                fraction = getattr(self.config, kind)
                if roll < fraction:
                    self.injected[kind] += 1
                    return kind
                roll -= fraction
        return None


def _as_kwargs(config: FaultConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    parsed = FaultConfig.from_value(config)
    return {kind: getattr(parsed, kind) for kind in KINDS} | {"seed": parsed.seed}
