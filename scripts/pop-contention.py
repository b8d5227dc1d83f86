#!/usr/bin/env python3
"""Why processes popping one queue do not add up: pops/s, CPU use and retries, by process count.

    .venv/bin/python scripts/pop-contention.py                     # 1, 2 and 8 processes
    .venv/bin/python scripts/pop-contention.py --processes 1,8 --items 40000

Each run fills the queue of a fresh embedded store (a temporary folder), then N processes,
started together at a barrier, pop it empty with plain pops (``service.pop``). For each N it
prints the aggregate pops/s; the CPU the popping processes used meanwhile (100% is one core busy
the whole time); and the transaction retries per pop, by FoundationDB error code (1020, a
conflict, is the one that matters here). It exits with 1 if the pops do not add up to the items
filled. Processes that use less than one core between them
while there is work are waiting, not working: in the back-off that ``on_error`` prescribes after
a conflict, or for SQLite's write lock.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUE = "contention"
#: Longest any run may take, start to end, before the script gives up on it.
RUN_SECONDS = 600


def _setup(store: str) -> Any:
    """Django set up on the embedded store at ``store``; its database handle."""
    sys.path.insert(0, os.path.dirname(HERE))
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["django_fdbqueue"], FDBQUEUE={"ENGINE": "embedded", "PATH": store}, USE_TZ=True
    )
    django.setup()
    from django_fdbqueue.connection import get_database

    return get_database()


def popper(store: str, barrier: Any, results: Any) -> None:
    """One popping process: pop until the queue is empty; report pops, seconds, CPU and retries."""
    db = _setup(store)
    from django_fdbqueue import service
    from django_fdbqueue.fdbapi import retry_counts

    service.peek(db, QUEUE, "min")  # connections open and the catalog cached before the start
    barrier.wait(RUN_SECONDS)
    pops, cpu, started = 0, time.process_time(), time.perf_counter()
    while service.pop(db, QUEUE, "min") is not None:
        pops += 1
    results.put((pops, time.perf_counter() - started, time.process_time() - cpu, retry_counts()))


def fill(store: str, items: int) -> None:
    """The queue, with ``items`` items pushed in batches (runs in a process of its own)."""
    db = _setup(store)
    from django_fdbqueue import service

    service.create_queue(db, QUEUE, "priority")
    for start in range(0, items, 500):
        service.push_many(db, QUEUE, [{"n": n} for n in range(start, min(items, start + 500))])


def run(processes: int, items: int) -> dict[str, Any]:
    """One run on a fresh store: the aggregate figures of ``processes`` poppers."""
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="fdbqueue-contention-") as folder:
        store = os.path.join(folder, "store.sqlite3")
        filler = context.Process(target=fill, args=(store, items))
        filler.start()
        filler.join(RUN_SECONDS)
        if filler.exitcode != 0:
            raise SystemExit(f"filling the queue failed (exit code {filler.exitcode})")
        barrier, results = context.Barrier(processes + 1), context.Queue()
        team = [context.Process(target=popper, args=(store, barrier, results)) for _ in range(processes)]
        for process in team:
            process.start()
        try:
            barrier.wait(RUN_SECONDS)
            started = time.perf_counter()
            reports = [results.get(timeout=RUN_SECONDS) for _ in team]
            seconds = time.perf_counter() - started
        finally:
            for process in team:
                process.join(RUN_SECONDS)
                if process.is_alive():
                    process.kill()
    pops = sum(report[0] for report in reports)
    retries: dict[int, int] = {}
    for report in reports:
        for code, count in report[3].items():
            retries[code] = retries.get(code, 0) + count
    return {
        "processes": processes,
        "pops": pops,
        "pops_per_s": pops / seconds,
        "cpu": sum(report[2] for report in reports) / seconds,
        "retries_per_pop": {code: count / max(pops, 1) for code, count in sorted(retries.items())},
    }


def line(figures: dict[str, Any], one: dict[str, Any] | None) -> str:
    """A printed line: the run's figures, and its rate against the one-process run's."""
    ratio = f"{figures['pops_per_s'] / one['pops_per_s']:.2f}x" if one else "-"
    retries = ", ".join(f"{code}: {share:.4f}" for code, share in figures["retries_per_pop"].items()) or "none"
    return (
        f"{figures['processes']:>9}  {figures['pops_per_s']:>7,.0f}  {ratio:>9}  "
        f"{100 * figures['cpu']:>7.0f}%  {retries}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", default="1,2,8", help="process counts, comma-separated")
    parser.add_argument("--items", type=int, default=20_000, help="items to pop in each run")
    args = parser.parse_args(argv)
    try:
        counts = [int(part) for part in args.processes.split(",")]
    except ValueError:
        parser.error(f"--processes takes whole numbers separated by commas, not {args.processes!r}")
    if any(count < 1 for count in counts) or args.items < 1:
        parser.error("--processes and --items must be at least 1")
    print(f"{args.items:,} items popped by each count of processes, plain pops, embedded engine")
    print("PROCESSES   POPS/S  VS 1 PROC  CPU USE  RETRIES PER POP, BY ERROR CODE")
    one = None
    for count in counts:
        figures = run(count, args.items)
        if figures["pops"] != args.items:
            print(f"{count} processes popped {figures['pops']:,} items of {args.items:,}", file=sys.stderr)
            return 1
        if count == 1:
            one = figures
        print(line(figures, one), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
