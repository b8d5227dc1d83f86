#!/usr/bin/env python3
"""Why clients consuming one queue do not add up: rate, latency, CPU and retries, by client count.

    .venv/bin/python scripts/pop-contention.py                     # 1, 2 and 8 processes
    .venv/bin/python scripts/pop-contention.py --processes 1,8 --items 40000
    .venv/bin/python scripts/pop-contention.py --threads 1,8,32 --mode high-contention --seconds 4 \\
        --cluster-file /etc/foundationdb/fdb.cluster
    .venv/bin/python scripts/pop-contention.py --threads 1,8,32 --op claim

Each row fills a fresh queue, then N clients (``--processes``, or ``--threads`` of this one
process), started together at a barrier, consume it: with pops (``service.pop`` in ``--mode``
plain or high-contention) or, with ``--op claim``, with a claim and the ack of its receipt (the
worker's path). They stop when the queue is empty or, with ``--seconds``, when the time is up (the
queue then holds enough items for that). The store is a fresh embedded one (a temporary folder),
or with ``--cluster-file`` a FoundationDB cluster, under a ROOT of the run's own that is cleared at
the end; its commit and read-version latency are measured before the rows and after them.

For each N it prints the aggregate rate and its ratio to the one-client row; the CPU the clients
used meanwhile (100% is one core busy the whole time) and per operation; the p50 and p99 latency
of an operation; the operations done; and the transaction retries per operation, by
FoundationDB error code (1020, a conflict, is the one that matters here). Clients that use less
than one core between them while there is work are waiting, not working: in the back-off that
``on_error`` prescribes after a conflict, for a commit, or for SQLite's write lock. Every row is
checked exactly once: no item id delivered twice, and every item filled either delivered or still
queued; the script exits with 1 when a row fails that check or a client fails.
"""

from __future__ import annotations

import argparse
import inspect
import math
import multiprocessing
import os
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))

if HERE not in sys.path:  # also when imported by path (the tests do), not run
    sys.path.insert(0, HERE)
from scratch_store import forget, open_store, store_setting  # noqa: E402 - beside this script

QUEUE = "contention"
#: Longest any row may take, start to end, before the script gives up on it.
RUN_SECONDS = 600
#: Items filled when --items is not given: on the embedded engine, and on a cluster (slower per item).
EMBEDDED_ITEMS, CLUSTER_ITEMS = 20_000, 2_000
#: A timed row's queue holds at least this many items per second of the row, so it seldom runs dry:
#: on the embedded engine, and on a cluster (where even independent commits top out near 4,000/s).
EMBEDDED_PER_SECOND, CLUSTER_PER_SECOND = 10_000, 4_000
#: Leases of ``--op claim``: far longer than the ack that follows a claim takes.
CLAIM_LEASE = 300.0
#: FoundationDB's "transaction timed out": an operation that ends so (after FDBQUEUE's TIMEOUT, 5 s)
#: is tried again, as a worker would, and counted with the retries under this code.
TIMED_OUT = 1031
#: Timeouts in a row after which a client gives up (and the row fails).
TIMEOUTS_IN_A_ROW = 12


def patiently(call: Callable[[], Any], timeouts: Counter) -> Any:
    """``call()``, tried again after each transaction timeout (counted in ``timeouts``)."""
    from django_fdbqueue.fdbapi import FDBError

    for attempt in range(TIMEOUTS_IN_A_ROW):
        try:
            return call()
        except FDBError as error:
            if error.code != TIMED_OUT or attempt + 1 == TIMEOUTS_IN_A_ROW:
                raise
            timeouts[TIMED_OUT] += 1
    raise AssertionError("unreachable")


def operation(db: Any, job: dict[str, Any], timeouts: Counter) -> Callable[[], str | None]:
    """One operation of ``job``: it consumes an item and returns its id, or None when none is left.
    The claim and its ack are tried again separately, so a timed-out ack does not strand a lease."""
    from django_fdbqueue import service

    queue, mode = job["queue"], job["mode"]
    if job["op"] == "pop":

        def pop() -> str | None:
            item = patiently(lambda: service.pop(db, queue, "min", mode=mode), timeouts)
            return None if item is None else item.id

        return pop
    extra = {} if mode == "plain" else {"mode": mode}
    if job["spread"] is not None:
        extra["spread"] = job["spread"]

    def claim_ack() -> str | None:
        lease = patiently(lambda: service.claim(db, queue, lease=CLAIM_LEASE, **extra), timeouts)
        if lease is None:
            return None
        patiently(lambda: service.ack(db, lease.receipt), timeouts)
        return lease.item.id

    return claim_ack


def consume(db: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Consume until the queue is empty or ``job``'s seconds are up: the ids and each one's latency."""
    timeouts: Counter = Counter()
    take = operation(db, job, timeouts)
    deadline = time.monotonic() + job["seconds"] if job["seconds"] else math.inf
    ids: list[str] = []
    latencies: list[float] = []
    tally = {"ids": ids, "latencies": latencies, "timeouts": timeouts}
    try:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            taken = take()
            if taken is None:
                break
            latencies.append(time.perf_counter() - began)
            ids.append(taken)
    except Exception as error:  # reported by the parent, which fails the row
        tally["error"] = f"{type(error).__name__}: {error}"
    return tally


def _retries_since(before: dict[int, int]) -> Counter:
    """Retries by error code in this process since ``before`` (a ``retry_counts()``)."""
    from django_fdbqueue.fdbapi import retry_counts

    return Counter(retry_counts()) - Counter(before)


def client_process(job: dict[str, Any], barrier: Any, results: Any) -> None:
    """One client process: consume after the barrier; report what it saw, its CPU and retries."""
    db = open_store(job["store"])
    from django_fdbqueue import service
    from django_fdbqueue.fdbapi import retry_counts

    service.peek(db, job["queue"], "min")  # connections open and the catalog cached before the start
    barrier.wait(RUN_SECONDS)
    cpu, retries = time.process_time(), retry_counts()
    tally = consume(db, job)
    tally.update(cpu=time.process_time() - cpu, retries=_retries_since(retries))
    results.put(tally)


def run_processes(job: dict[str, Any], count: int) -> tuple[list[dict[str, Any]], float, float, Counter]:
    """``count`` spawned clients on ``job``: their tallies, the seconds, their CPU and retries."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(count + 1), context.Queue()
    team = [context.Process(target=client_process, args=(job, barrier, results)) for _ in range(count)]
    for process in team:
        process.start()
    try:
        barrier.wait(RUN_SECONDS)
        started = time.perf_counter()
        tallies = [results.get(timeout=RUN_SECONDS) for _ in team]
        seconds = time.perf_counter() - started
    finally:
        for process in team:
            process.join(RUN_SECONDS)
            if process.is_alive():
                process.kill()
    retries = sum((tally["retries"] for tally in tallies), Counter())
    return tallies, seconds, sum(tally["cpu"] for tally in tallies), retries


def run_threads(db: Any, job: dict[str, Any], count: int) -> tuple[list[dict[str, Any]], float, float, Counter]:
    """``count`` client threads of this process on ``job``: their tallies, the seconds, the
    process's CPU (the binding's network thread included) and retries meanwhile."""
    from django_fdbqueue.fdbapi import retry_counts

    barrier, tallies = threading.Barrier(count + 1), []

    def client() -> None:
        barrier.wait(RUN_SECONDS)
        tallies.append(consume(db, job))

    team = [threading.Thread(target=client, daemon=True) for _ in range(count)]
    for thread in team:
        thread.start()
    barrier.wait(RUN_SECONDS)
    cpu, retries, started = time.process_time(), retry_counts(), time.perf_counter()
    for thread in team:
        thread.join(max(0.0, started + RUN_SECONDS - time.perf_counter()))
    seconds = time.perf_counter() - started
    if any(thread.is_alive() for thread in team):
        raise SystemExit(f"{count} threads: not done after {RUN_SECONDS} s")
    return tallies, seconds, time.process_time() - cpu, _retries_since(retries)


def fill(db: Any, items: int) -> None:
    """A fresh queue with ``items`` items, pushed in batches."""
    from django_fdbqueue import service

    service.create_queue(db, QUEUE, "priority")
    for start in range(0, items, 500):
        service.push_many(db, QUEUE, [{"n": n} for n in range(start, min(items, start + 500))])


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (nearest rank), 0 for none."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)] if ordered else 0.0


def figures(count: int, tallies: list[dict[str, Any]], seconds: float, cpu: float, retries: Counter) -> dict[str, Any]:
    """One row's figures from its clients' tallies."""
    ids = [item for tally in tallies for item in tally["ids"]]
    retries = retries + sum((tally["timeouts"] for tally in tallies), Counter())
    latencies = [latency for tally in tallies for latency in tally["latencies"]]
    ops = len(ids)
    return {
        "count": count,
        "ids": ids,
        "ops": ops,
        "ops_per_s": ops / seconds,
        "cpu": cpu / seconds,
        "cpu_per_op_us": 1e6 * cpu / max(ops, 1),
        "p50_ms": 1000 * percentile(latencies, 0.5),
        "p99_ms": 1000 * percentile(latencies, 0.99),
        "retries_per_op": {code: n / max(ops, 1) for code, n in sorted(retries.items())},
        "errors": [tally["error"] for tally in tallies if "error" in tally],
    }


def problems(row: dict[str, Any], unit: str, filled: int, left: int, timed: bool) -> list[str]:
    """What is wrong with a row's deliveries: errors, ids delivered twice, items lost."""
    found = [f"{row['count']} {unit}: a client failed: {error}" for error in row["errors"]]
    twice = row["ops"] - len(set(row["ids"]))
    if twice:
        found.append(f"{row['count']} {unit}: {twice:,} item ids delivered twice")
    if not timed and row["ops"] != filled:
        found.append(f"{row['count']} {unit} consumed {row['ops']:,} items of {filled:,}")
    elif row["ops"] + left != filled:
        found.append(f"{row['count']} {unit}: {row['ops']:,} delivered and {left:,} left of {filled:,}")
    return found


def run_row(db: Any, args: argparse.Namespace, count: int) -> tuple[dict[str, Any], list[str]]:
    """One row on a fresh queue (deleted afterwards): its figures, and what is wrong with it."""
    from django_fdbqueue import service

    filled = max(args.items, math.ceil(args.per_second * args.seconds)) if args.seconds else args.items
    fill(db, filled)
    job = {
        "store": args.store,
        "queue": QUEUE,
        "op": args.op,
        "mode": args.mode,
        "seconds": args.seconds,
        "spread": args.spread,
    }
    try:
        if args.threads:
            service.peek(db, QUEUE, "min")
            measured = run_threads(db, job, count)
        else:
            measured = run_processes(job, count)
        row = figures(count, *measured)
        left = service.size(db, QUEUE)
    finally:
        service.delete_queue(db, QUEUE)
    if args.seconds and not left and not row["errors"]:
        print(
            f"note: the row of {count} {args.unit} emptied its queue of {filled:,} items before the "
            f"{args.seconds:g} s were up; its rate is over the time that took",
            file=sys.stderr,
        )
    return row, problems(row, args.unit, filled, left, bool(args.seconds))


def header(args: argparse.Namespace, store: str) -> list[str]:
    """The lines above the rows: what was run, on which store; the columns."""
    what = "pops" if args.op == "pop" else "claims and acks"
    if args.spread is not None:
        what = f"spread claims (one of the first {args.spread}) and acks"
    verb = "popped" if args.op == "pop" else "claimed and acked"
    if args.seconds:
        title = f"{args.seconds:g} s of {args.mode} {what} by each count of {args.unit}, {store}"
    else:
        title = f"{args.items:,} items {verb} by each count of {args.unit}, {args.mode} {what}, {store}"
    short = "PROC" if args.unit == "processes" else "THREAD"
    name = "POPS" if args.op == "pop" else "CLAIMS"
    per = "POP" if args.op == "pop" else "CLAIM+ACK"
    columns = (
        f"{args.unit.upper():>9}  {name + '/S':>8}  VS 1 {short}  CPU USE  P50 MS  P99 MS  CPU/OP US  "
        f"{name:>7}  RETRIES PER {per}, BY ERROR CODE"
    )
    return [title, columns]


def line(row: dict[str, Any], one: dict[str, Any] | None, unit: str) -> str:
    """A printed line: the row's figures, and its rate against the one-client row's."""
    ratio = f"{row['ops_per_s'] / one['ops_per_s']:.2f}x" if one else "-"
    retries = ", ".join(f"{code}: {share:.4f}" for code, share in row["retries_per_op"].items()) or "none"
    return (
        f"{row['count']:>9}  {row['ops_per_s']:>8,.0f}  {ratio:>{10 if unit == 'threads' else 9}}  "
        f"{100 * row['cpu']:>6.0f}%  {row['p50_ms']:>6.2f}  {row['p99_ms']:>6.1f}  "
        f"{row['cpu_per_op_us']:>9,.0f}  {row['ops']:>7,}  {retries}"
    )


def store_latency(db: Any) -> str:
    """The cluster's commit and read-version latency now (medians, with nothing else running)."""
    from django_fdbqueue.bench.latency import probe, probe_key
    from django_fdbqueue.connection import root_subspace

    measured = probe(db, probe_key(root_subspace(), "contention"))
    return (
        f"commit {measured.commit_ms:.3g} ms, read version {measured.read_version_ms:.3g} ms "
        f"(medians of {measured.samples}"
    )


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments, checked; exits with 2 and a message on bad ones."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    clients = parser.add_mutually_exclusive_group()
    clients.add_argument("--processes", help="process counts, comma-separated (default 1,2,8)")
    clients.add_argument("--threads", help="thread counts of one process, comma-separated")
    parser.add_argument(
        "--items",
        type=int,
        help=f"items to consume in each row (default {EMBEDDED_ITEMS:,}; "
        f"{CLUSTER_ITEMS:,} on a cluster); a timed row fills at least "
        f"{EMBEDDED_PER_SECOND:,} a second ({CLUSTER_PER_SECOND:,} on a cluster)",
    )
    parser.add_argument("--seconds", type=float, help="end each row after this long (default: when empty)")
    parser.add_argument("--mode", choices=("plain", "high-contention"), default="plain", help="service.pop's mode")
    parser.add_argument("--op", choices=("pop", "claim"), default="pop", help="pop, or claim then ack")
    parser.add_argument(
        "--spread",
        type=int,
        default=None,
        metavar="K",
        help="with --op claim: service.claim's spread (one of the first K ready items)",
    )
    parser.add_argument("--cluster-file", help="run on this FoundationDB cluster (default: a fresh embedded store)")
    parser.add_argument("--client-library", help="FoundationDB's libfdb_c (default: $FDBQUEUE_CLIENT_LIBRARY)")
    args = parser.parse_args(argv)
    check(parser, args)
    return args


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse what cannot run, with a message (``parser.error`` exits with 2); fill in defaults."""
    args.unit = "threads" if args.threads else "processes"
    text = args.threads or args.processes or "1,2,8"
    try:
        args.counts = [int(part) for part in text.split(",")]
    except ValueError:
        parser.error(f"--{args.unit} takes whole numbers separated by commas, not {text!r}")
    if args.items is None:
        args.items = CLUSTER_ITEMS if args.cluster_file else EMBEDDED_ITEMS
    args.per_second = CLUSTER_PER_SECOND if args.cluster_file else EMBEDDED_PER_SECOND
    if any(count < 1 for count in args.counts) or args.items < 1:
        parser.error(f"--{args.unit} and --items must be at least 1")
    if args.seconds is not None and not (0 < args.seconds <= RUN_SECONDS / 2):
        parser.error(f"--seconds must be more than 0 and at most {RUN_SECONDS // 2}, not {args.seconds:g}")
    if args.client_library and not args.cluster_file:
        parser.error("--client-library needs --cluster-file: the embedded engine uses no client library")
    if args.cluster_file:
        args.client_library = args.client_library or os.environ.get("FDBQUEUE_CLIENT_LIBRARY")
    for option, path in (("--cluster-file", args.cluster_file), ("--client-library", args.client_library)):
        if path and not os.path.isfile(path):
            parser.error(f"{option}: {path} is not a file")
    args.error = parser.error
    args.store = store_setting("contention", args.cluster_file, args.client_library)


def claims_take_mode(args: argparse.Namespace) -> None:
    """Refuse ``--op claim`` with a mode the service's claim does not have."""
    from django_fdbqueue import service

    if args.op == "claim" and args.mode != "plain" and "mode" not in inspect.signature(service.claim).parameters:
        args.error(f"--mode {args.mode} applies to --op pop: service.claim has no mode")
    if args.spread is not None and (args.op != "claim" or not 2 <= args.spread <= service.MAX_SPREAD):
        args.error(f"--spread goes with --op claim and is from 2 to {service.MAX_SPREAD}")


def rows(db: Any, args: argparse.Namespace) -> int:
    """Print every row; 1 as soon as one fails its check, else 0."""
    one = None
    for count in args.counts:
        row, found = run_row(db, args, count)
        if found:
            print("\n".join(found), file=sys.stderr)
            return 1
        if count == 1:
            one = row
        print(line(row, one, args.unit), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        db = open_store(args.store)
        claims_take_mode(args)
        cluster = args.store["ENGINE"] == "foundationdb"
        store = f"FoundationDB cluster: {store_latency(db)} before the rows)" if cluster else "embedded engine"
        print("\n".join(header(args, store)), flush=True)
        status = rows(db, args)
        if cluster:
            print(f"After the rows: {store_latency(db)})")
        return status
    finally:
        forget(args.store)


if __name__ == "__main__":
    sys.exit(main())
