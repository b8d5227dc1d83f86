"""Many seeds in a row, and the shortest run that still fails.

:func:`run_seeds` runs seeds one after another until one fails, the count is reached or the time
is up. :func:`shrink` takes a failing run and looks for a shorter one of the same seed that
fails the same way: fewer operations per actor, then fewer steps (the run cut there, then wound
down and judged as usual). What it returns replays with its own one-line command.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from . import Options, Result, simulate


@dataclass
class Campaign:
    """What a run of many seeds found, and what it cost."""

    results: list[Result]
    seconds: float
    cpu_seconds: float

    @property
    def failure(self) -> Result | None:
        return next((r for r in self.results if not r.ok), None)

    @property
    def seeds_per_second(self) -> float:
        return len(self.results) / self.seconds if self.seconds else 0.0


def run_seeds(
    seeds: Iterable[int],
    options: Options,
    *,
    minutes: float | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> Campaign:
    """Run ``seeds`` in order; stop at the first failure, or once ``minutes`` have passed."""
    started, cpu = time.perf_counter(), time.process_time()
    results: list[Result] = []
    for seed in seeds:
        if minutes is not None and time.perf_counter() - started > minutes * 60:
            break
        result = simulate(seed, options)
        results.append(result)
        if on_result is not None:
            on_result(result)
        if not result.ok:
            break
    return Campaign(results, time.perf_counter() - started, time.process_time() - cpu)


def _same_failure(result: Result, kinds: set[str]) -> bool:
    return any(v.kind in kinds for v in result.violations)


def shrink(failed: Result, *, tries: int = 30) -> Result:
    """A shorter run of the same seed that fails the same way (or ``failed`` itself)."""
    kinds = {v.kind for v in failed.violations}
    best = failed
    for _ in range(tries):
        operations = best.options.shape.operations // 2
        if operations < 1:
            break
        shape = dataclasses.replace(best.options.shape, operations=operations)
        trial = simulate(best.seed, dataclasses.replace(best.options, shape=shape))
        if not _same_failure(trial, kinds):
            break
        best = trial
    low, high = 1, best.steps
    while low < high and tries > 0:
        tries -= 1
        middle = (low + high) // 2
        trial = simulate(best.seed, dataclasses.replace(best.options, max_steps=middle))
        if _same_failure(trial, kinds):
            best, high = trial, middle
        else:
            low = middle + 1
    return best
