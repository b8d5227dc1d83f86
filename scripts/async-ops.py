#!/usr/bin/env python3
"""How the async face should run a short operation: asgiref's ``sync_to_async`` or a bounded pool.

    .venv/bin/python scripts/async-ops.py
    .venv/bin/python scripts/async-ops.py --ops 2000 --concurrency 64 --cluster-file /etc/foundationdb/fdb.cluster

For push and pop, on a fresh embedded store (a temporary folder) or with ``--cluster-file`` a
FoundationDB cluster under a ROOT of the run's own (cleared at the end), it runs ``--ops``
operations three ways: the sync function called directly (the floor), through
``asgiref.sync.sync_to_async(thread_sensitive=False)``, and through the service's own bounded
pool (``service.offload``, what ``apush`` and ``apop`` use). Each way is measured one at a time
(per-op latency; its excess over the direct call is the bridge's overhead) and with
``--concurrency`` coroutines at once (ops/s). Compare the rows of one run only: the figures move
with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))

if HERE not in sys.path:  # also when imported by path (the tests do), not run
    sys.path.insert(0, HERE)
from scratch_store import forget, open_store, store_setting  # noqa: E402 - beside this script

QUEUE = "async-ops"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="operations per measurement (default 2000)")
    parser.add_argument("--concurrency", type=int, default=64, help="coroutines at once (default 64)")
    parser.add_argument("--cluster-file", help="a FoundationDB cluster file (default: a fresh embedded store)")
    parser.add_argument("--client-library", help="libfdb_c (default: $FDBQUEUE_CLIENT_LIBRARY)")
    args = parser.parse_args(argv)
    if args.ops < 1 or args.concurrency < 1:
        parser.error("--ops and --concurrency must be at least 1")
    if args.cluster_file and not os.path.isfile(args.cluster_file):
        parser.error(f"--cluster-file: {args.cluster_file} is not a file")
    return args


def bridges() -> dict[str, Callable[..., Any]]:
    """Each way of awaiting a sync call: ``await bridge(func, *args)``."""
    from asgiref.sync import sync_to_async

    from django_fdbqueue.service._internals import offload

    async def asgiref(func: Callable[..., Any], *args: Any) -> Any:
        return await sync_to_async(func, thread_sensitive=False)(*args)

    return {"sync_to_async": asgiref, "offload pool": offload.run}


def direct(func: Callable[[], Any], ops: int) -> float:
    started = time.perf_counter()
    for _ in range(ops):
        func()
    return time.perf_counter() - started


async def one_at_a_time(bridge: Callable[..., Any], func: Callable[[], Any], ops: int) -> float:
    started = time.perf_counter()
    for _ in range(ops):
        await bridge(func)
    return time.perf_counter() - started


async def at_once(bridge: Callable[..., Any], func: Callable[[], Any], ops: int, concurrency: int) -> float:
    left = iter(range(ops))

    async def client() -> None:
        for _ in left:
            await bridge(func)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return time.perf_counter() - started


def fresh(db: Any, op: str, ops: int) -> Callable[[], Any]:
    """The call to measure, on a queue of its own (filled for pops): each row starts alike, since
    a pop after many pops reads past keys cleared moments ago, which costs on a cluster."""
    from django_fdbqueue import service

    name = f"{QUEUE}-{uuid.uuid4().hex[:12]}"
    service.create_queue(db, name, kind="fifo")
    if op == "pop":
        service.push_many(db, name, ["x"] * ops)
        return lambda: service.pop(db, name)
    return lambda: service.push(db, name, "x")


def measure(db: Any, args: argparse.Namespace) -> list[str]:
    lines = [
        f"{'op':<5} {'way':<14} {'per op (1 at a time)':>21} {'overhead':>9} {'ops/s at ' + str(args.concurrency):>13}"
    ]
    for op in ("push", "pop"):
        floor = direct(fresh(db, op, args.ops), args.ops) / args.ops
        lines.append(f"{op:<5} {'direct':<14} {floor * 1e6:>18.0f} us {'':>9} {'':>13}")
        for way, bridge in bridges().items():
            single = asyncio.run(one_at_a_time(bridge, fresh(db, op, args.ops), args.ops)) / args.ops
            many = asyncio.run(at_once(bridge, fresh(db, op, args.ops), args.ops, args.concurrency))
            lines.append(
                f"{op:<5} {way:<14} {single * 1e6:>18.0f} us {(single - floor) * 1e6:>6.0f} us "
                f"{args.ops / many:>13,.0f}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    store = store_setting("async-ops", args.cluster_file, args.client_library)
    try:
        db = open_store(store)
        from django_fdbqueue.service._internals import offload

        where = "FoundationDB cluster" if args.cluster_file else "embedded engine"
        print(f"{where}: {args.ops} ops per row, {offload.POOL_THREADS} pool threads, {os.cpu_count()} cores")
        print("\n".join(measure(db, args)))
        return 0
    finally:
        forget(store)


if __name__ == "__main__":
    sys.exit(main())
