#!/usr/bin/env python3
"""Many coroutines waiting in one process: N ``await service.aclaim(wait=...)``, woken by another process.

    .venv/bin/python scripts/async-waiters.py                      # 10,000 waiters, embedded engine
    .venv/bin/python scripts/async-waiters.py --waiters 1000 --cluster-file /etc/foundationdb/fdb.cluster

This process parks ``--waiters`` claims (each ``aclaim(wait=20)``, again until it gets an item)
on one queue of a fresh store (a temporary embedded one, or with ``--cluster-file`` a cluster
under a ROOT of the run's own, cleared at the end). Once all are parked, another process pushes
as many items, one push each. It prints the items delivered, duplicates, items lost (neither
delivered nor left in the queue), wake-up latency p50/p99 (from the push call to the claim's
return), the peak thread count, and the memory (RSS) each parked waiter added. A claim that ends
with 1031 (conflicts past TIMEOUT, as the sync claim would) is tried again, as a worker does, and
counted. Exits 1 when an item was lost or delivered twice, or a waiter failed otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))

if HERE not in sys.path:  # also when imported by path (the tests do), not run
    sys.path.insert(0, HERE)
from scratch_store import forget, open_store, store_setting  # noqa: E402 - beside this script

QUEUE = "async-waiters"
#: FoundationDB's "transaction timed out" (FDBQUEUE's TIMEOUT, 5 s by default).
TIMED_OUT = 1031
#: Longest the whole run may take before the waiters are given up.
RUN_SECONDS = 300.0


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--waiters", type=int, default=10_000, help="coroutines waiting at once (default 10,000)")
    parser.add_argument("--cluster-file", help="a FoundationDB cluster file (default: a fresh embedded store)")
    parser.add_argument("--client-library", help="libfdb_c (default: $FDBQUEUE_CLIENT_LIBRARY)")
    args = parser.parse_args(argv)
    if args.waiters < 1:
        parser.error("--waiters must be at least 1")
    if args.cluster_file and not os.path.isfile(args.cluster_file):
        parser.error(f"--cluster-file: {args.cluster_file} is not a file")
    return args


def pusher(store: dict[str, Any], count: int, go: Any) -> None:
    """The other process: once told, push ``count`` items, each carrying the time of its push."""
    db = open_store(store)
    from django_fdbqueue import service

    if not go.wait(RUN_SECONDS):
        return
    for n in range(count):
        service.push(db, QUEUE, {"n": n, "t": time.time()})


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Run:
    def __init__(self, db: Any, count: int) -> None:
        self.db = db
        self.count = count
        self.got: list[tuple[int, float]] = []  # (n, seconds from push to claim)
        self.peak_threads = threading.active_count()
        self.timeouts = 0
        self.deadline = time.monotonic() + RUN_SECONDS

    async def waiter(self) -> None:
        from django_fdbqueue import service
        from django_fdbqueue.fdbapi import FDBError

        while time.monotonic() < self.deadline:
            try:
                lease = await service.aclaim(self.db, QUEUE, wait=service.MAX_WAIT_SECONDS, lease=600)
            except FDBError as error:
                if error.code != TIMED_OUT:
                    raise
                self.timeouts += 1  # a claim that met conflicts past TIMEOUT: tried again, as a worker does
                continue
            if lease is not None:
                self.got.append((lease.item.value["n"], time.time() - lease.item.value["t"]))
                return

    async def sample_threads(self) -> None:
        while True:
            self.peak_threads = max(self.peak_threads, threading.active_count())
            await asyncio.sleep(0.05)

    async def parked(self) -> int:
        from django_fdbqueue.service._internals import watchhub

        return sum(len(c.parked) for c in watchhub.channels())

    async def run(self, go: Any) -> dict[str, Any]:
        sampler = asyncio.ensure_future(self.sample_threads())
        before = rss_bytes()
        tasks = [asyncio.ensure_future(self.waiter()) for _ in range(self.count)]
        while await self.parked() < self.count:
            if time.monotonic() > self.deadline:
                raise SystemExit("the waiters did not all park in time")
            await asyncio.sleep(0.05)
        per_waiter = (rss_bytes() - before) / self.count
        parked_at = time.monotonic()
        go.set()
        await asyncio.wait(tasks, timeout=max(1.0, self.deadline - time.monotonic()))
        failed = [task.exception() for task in tasks if task.done() and task.exception() is not None]
        for task in tasks:
            task.cancel()
        sampler.cancel()
        return {"per_waiter": per_waiter, "seconds": time.monotonic() - parked_at, "failed": failed}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    store = store_setting("waiters", args.cluster_file, args.client_library)
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    child = None
    try:
        db = open_store(store)
        from django_fdbqueue import service
        from django_fdbqueue.service._internals import offload

        service.create_queue(db, QUEUE, kind="fifo")
        child = ctx.Process(target=pusher, args=(store, args.waiters, go), daemon=True)
        child.start()
        run = Run(db, args.waiters)
        figures = asyncio.run(run.run(go))
        child.join(RUN_SECONDS)
        offload.undos_settled(60)
        values = [n for n, _latency in run.got]
        left = service.size(db, QUEUE)
        duplicates = len(values) - len(set(values))
        lost = args.waiters - len(set(values)) - left
        latencies = [latency for _n, latency in run.got]
        where = "FoundationDB cluster" if args.cluster_file else "embedded engine"
        print(
            f"{where}: {args.waiters:,} waiters parked with aclaim(wait=20), {args.waiters:,} items pushed by another process"
        )
        print(
            f"delivered {len(values):,}, duplicates {duplicates}, lost {lost}, left in the queue {left}, "
            f"in {figures['seconds']:.1f} s from the first push; {run.timeouts} claims timed out (1031) and were tried again"
        )
        print(
            f"wake-up (push call to claim returned): p50 {percentile(latencies, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(latencies, 0.99) * 1000:.0f} ms"
        )
        if figures["failed"]:
            print(f"{len(figures['failed'])} waiters failed, the first with {figures['failed'][0]!r}")
        print(
            f"peak threads {run.peak_threads} ({offload.POOL_THREADS} in the pool); "
            f"memory per parked waiter {figures['per_waiter'] / 1024:.1f} kB (RSS)"
        )
        return 0 if duplicates == lost == len(figures["failed"]) == 0 else 1
    finally:
        if child is not None and child.is_alive():
            child.kill()
            child.join(10)
        forget(store)


if __name__ == "__main__":
    sys.exit(main())
