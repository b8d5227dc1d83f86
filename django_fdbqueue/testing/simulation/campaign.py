"""Many seeds in a row, and the shortest run that still fails.

:func:`run_seeds` runs seeds until one fails, the count is reached or the time is up: one after
another, or spread over worker processes (``jobs``), each seed still a run of its own that
replays alike in any process. :func:`shrink` takes a failing run and looks for a shorter one of the same seed that
fails the same way: fewer operations per actor, then fewer steps (the run cut there, then wound
down and judged as usual). What it returns replays with its own one-line command.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import time
from dataclasses import dataclass
from typing import Callable, Generator, Iterable

from . import Options, Result, simulate


@dataclass
class Campaign:
    """What a run of many seeds found, and what it cost."""

    results: list[Result]
    seconds: float
    cpu_seconds: float  # of every process that ran seeds

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
    jobs: int = 1,
) -> Campaign:
    """Run ``seeds``; stop at the first failure, or once ``minutes`` have passed.

    With ``jobs`` > 1 they run in that many processes (started afresh, with this process's
    ``DJANGO_SETTINGS_MODULE``); results come back in seed order, up to the first failure.
    """
    started = time.perf_counter()
    results: list[Result] = []
    cpu = 0.0
    runs = _in_order(seeds, options) if jobs <= 1 else _in_processes(list(seeds), options, jobs)
    for result, seconds in runs:
        results.append(result)
        cpu += seconds
        if on_result is not None:
            on_result(result)
        if not result.ok or (minutes is not None and time.perf_counter() - started > minutes * 60):
            runs.close()
            break
    return Campaign(results, time.perf_counter() - started, cpu)


def _in_order(seeds: Iterable[int], options: Options) -> Generator[tuple[Result, float], None, None]:
    for seed in seeds:
        yield _timed(seed, options)


def _timed(seed: int, options: Options) -> tuple[Result, float]:
    """One seed's result, and the CPU seconds its run took."""
    cpu = time.process_time()
    result = simulate(seed, options)
    return result, time.process_time() - cpu


def _remote(seed: int, options: Options) -> tuple[Result, float]:
    """``_timed`` in a worker process: a passing run's trace stays there (it is long)."""
    result, cpu = _timed(seed, options)
    if result.ok:
        result.trace = []
    return result, cpu


def _in_processes(seeds: list[int], options: Options, jobs: int) -> Generator[tuple[Result, float], None, None]:
    """Seeds run ``jobs`` at a time in worker processes, yielded in seed order."""
    settings = os.environ.get("DJANGO_SETTINGS_MODULE")
    if not settings:
        raise ValueError("running seeds in several processes needs DJANGO_SETTINGS_MODULE set")
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        jobs, mp_context=spawn, initializer=_setup, initargs=(settings,)
    ) as pool:
        pending = iter(seeds)
        running = [pool.submit(_remote, seed, options) for seed in _take(pending, 2 * jobs)]
        try:
            while running:
                done = running.pop(0).result()
                running += [pool.submit(_remote, seed, options) for seed in _take(pending, 1)]
                yield done
        finally:
            for future in running:
                future.cancel()


def _take(seeds: Iterable[int], count: int) -> list[int]:
    return [seed for _, seed in zip(range(count), seeds)]


def _setup(settings: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    import django

    django.setup()


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
