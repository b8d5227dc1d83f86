#!/usr/bin/env python3
"""Client CPU per operation, against FoundationDB's priority-queue recipe in the same process.

    .venv/bin/python scripts/cpu-per-op.py                       # both engines, the table on stdout
    .venv/bin/python scripts/cpu-per-op.py --engines embedded    # one engine
    .venv/bin/python scripts/cpu-per-op.py --profile FILE.txt    # and a cProfile of each operation

Needs the recipe's page (``FDBQUEUE_BENCH_RECIPE``, as for ``manage.py fdbqueue bench --recipe``)
and, for the ``foundationdb`` engine, FoundationDB's binaries (``FDB_HOME``) and client library
(``FDBQUEUE_CLIENT_LIBRARY``): it starts a throwaway one-process cluster whose commits take 5 ms.

One client thread, one queue, in rounds: each round fills the queues (untimed), then makes
``--ops`` calls of each operation (the recipe's push and pop, the service's push, plain pop,
high-contention pop, and claim followed by ack), the operations taking turns call by call. The
figure is the process's CPU time (every thread: the FoundationDB client's network thread too)
per call, as the bench's ``CPU MS/OP`` column counts it, so a machine busy with other work changes
it less than it changes wall-clock rates, and taking turns makes what change there is fall on
every operation alike. The table shows each row's median over the rounds, and the median of its
ratio to the recipe's pop *of the same round*; the last column is the calling thread's share (the
rest is the client library's network thread).

``--profile`` runs the same rounds under cProfile (which slows every Python call, so its times
are not the table's) and writes, per engine and operation, the functions with the most own time
and how many times each ran per operation: what a call costs beyond the recipe's.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUE = "cpu"
RECIPE_POP = "recipe pop"
#: What each round times, in this order (the recipe first, so every ratio has its reference).
OPERATIONS = ("recipe push", RECIPE_POP, "push", "plain pop", "high-contention pop", "claim+ack")
ENGINES = ("foundationdb", "embedded")
COMMIT_LATENCY = 0.005
TOP = 22


# --- the child: one engine, in its own process (Django is configured once per process) ---------


def _setup(engine: str, place: str) -> Any:
    sys.path.insert(0, HERE)
    from scratch_store import open_store  # beside this script

    return open_store(
        {"ENGINE": engine, "PATH": place} if engine == "embedded" else {"ENGINE": engine, "CLUSTER_FILE": place}
    )


def _recipe(db: Any) -> Any:
    sys.path.insert(0, os.path.dirname(HERE))
    from benchmarks.recipe_ref import bind
    from benchmarks.recipe_source import load_recipe

    from django_fdbqueue.connection import root_subspace

    path = os.environ.get("FDBQUEUE_BENCH_RECIPE")
    if not path:
        raise SystemExit("FDBQUEUE_BENCH_RECIPE must name the recipe's page (see .ci/run)")
    return bind(load_recipe(path).code, db, root_subspace()["cpu-recipe"][QUEUE])


def _operations(db: Any, ops: int) -> tuple[Callable[[], None], dict[str, Callable[[int], Any]]]:
    """What fills the queues before a round (untimed), and each operation's call (timed)."""
    from django_fdbqueue import service

    recipe = _recipe(db)
    encoded = [json.dumps({"n": n}, separators=(",", ":")).encode() for n in range(ops)]

    def fill() -> None:
        # A round's pops, high-contention pops and claims take 3 x ops items of the one queue
        # (its pushes add more); the recipe's pops take what its pushes add, ops more kept ahead.
        for _ in range(3):
            service.push_many(db, QUEUE, [({"n": n}, n % 10) for n in range(ops)])
        for n in range(ops):
            recipe.push(db, encoded[n], n % 10)

    def claim_ack(n: int) -> None:
        lease = service.claim(db, QUEUE)
        assert lease is not None
        service.ack(db, lease.receipt)

    def popped(item: Any) -> None:
        assert item is not None

    return fill, {
        "recipe push": lambda n: recipe.push(db, encoded[n], n % 10),
        RECIPE_POP: lambda n: popped(recipe.pop(db, False)),
        "push": lambda n: service.push(db, QUEUE, {"n": n}, n % 10),
        "plain pop": lambda n: popped(service.pop(db, QUEUE)),
        "high-contention pop": lambda n: popped(service.pop(db, QUEUE, mode="high-contention")),
        "claim+ack": claim_ack,
    }


def _round(calls: dict[str, Callable[[int], Any]], ops: int) -> dict[str, tuple[float, float]]:
    """CPU milliseconds per call of each operation: the whole process's, and the calling thread's.

    The operations take turns call by call, so a change in what else the machine does falls on
    all of them alike, and each call is timed on its own."""
    spent = {name: [0.0, 0.0] for name in calls}
    clock, thread_clock = time.process_time, time.thread_time
    for n in range(ops):
        for name, call in calls.items():
            started, thread_started = clock(), thread_clock()
            call(n)
            total = spent[name]
            total[0] += clock() - started
            total[1] += thread_clock() - thread_started
    return {name: (1000 * process / ops, 1000 * thread / ops) for name, (process, thread) in spent.items()}


def _profiled(calls: dict[str, Callable[[int], Any]], ops: int, profiles: dict[str, cProfile.Profile]) -> None:
    for n in range(ops):
        for name, call in calls.items():
            profiles[name].enable()
            call(n)
            profiles[name].disable()


def child(engine: str, place: str, ops: int, rounds: int, profiling: bool) -> None:
    """Print, as JSON, each operation's CPU ms per call in every round (and the profiles)."""
    db = _setup(engine, place)
    from django_fdbqueue import service

    if service.queue_exists(db, QUEUE):  # left by an earlier run on the same store
        service.delete_queue(db, QUEUE)
    service.create_queue(db, QUEUE, "priority")
    fill, calls = _operations(db, ops)
    per_round: dict[str, list[tuple[float, float]]] = {name: [] for name in OPERATIONS}
    for number in range(rounds + 1):  # round 0 warms up: caches filled, code paths taken once
        fill()
        spent = _round(calls, ops)
        for name in OPERATIONS:
            if number:
                per_round[name].append(spent[name])
    texts = {}
    if profiling:  # rounds of their own: cProfile slows every call, the table's rounds are clean
        # The clock is the calling thread's CPU time: waits for the cluster cost nothing.
        profiles = {name: cProfile.Profile(time.thread_time) for name in OPERATIONS}
        for _number in range(rounds):
            fill()
            _profiled(calls, ops, profiles)
        texts = {name: _profile_text(profile, ops * rounds) for name, profile in profiles.items()}
    print(json.dumps({"rounds": per_round, "profiles": texts}))


def _profile_text(profile: cProfile.Profile, calls: int) -> str:
    """The functions with the most own time (the calling thread's CPU), with how often each ran."""
    stats = pstats.Stats(profile, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values()) or 1.0
    rows = sorted(((entry[2], entry[1], _where(*place)) for place, entry in stats.items()), reverse=True)
    python_calls = sum(entry[1] for entry in stats.values())
    lines = [
        f"  Python calls per operation: {python_calls / calls:,.0f}; "
        f"calling thread's CPU per operation, profiled: {1e6 * total / calls:,.0f} us",
        f"  {'OWN %':>6}  {'OWN US/OP':>9}  {'CALLS/OP':>8}  FUNCTION",
    ]
    lines += [
        f"  {100 * own / total:6.1f}  {1e6 * own / calls:9.1f}  {count / calls:8.2f}  {where}"
        for own, count, where in rows[:TOP]
    ]
    return "\n".join(lines)


def _where(path: str, line: int, function: str) -> str:
    for marker in ("django_fdbqueue/", "fdb/", "benchmarks/"):
        if marker in path:
            return f"{function} ({marker}{path.split(marker, 1)[1]}:{line})"
    if path == "~":
        return function  # a built-in
    return f"{function} ({os.path.basename(path)}:{line})"


# --- the parent: a store per engine, a child per engine, the table -----------------------------


def _run_child(engine: str, place: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, os.path.abspath(__file__), "--child", engine, place]
    command += ["--ops", str(args.ops), "--rounds", str(args.rounds)] + (["--profile", "-"] if args.profile else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the {engine} run failed:\n{done.stdout}{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(engine: str, args: argparse.Namespace) -> dict[str, Any]:
    if engine == "embedded":
        with tempfile.TemporaryDirectory(prefix="fdbqueue-cpu-") as folder:
            return _run_child(engine, os.path.join(folder, "store.sqlite3"), args)
    sys.path.insert(0, os.path.dirname(HERE))
    from django_fdbqueue.testing.cluster import LocalCluster

    with LocalCluster(commit_latency=COMMIT_LATENCY) as cluster:
        return _run_child(engine, cluster.cluster_file, args)


def table(engine: str, rounds: dict[str, list[list[float]]]) -> str:
    reference = [spent[0] for spent in rounds[RECIPE_POP]]
    title = "cluster (foundationdb engine, 5 ms commits)" if engine == "foundationdb" else "embedded engine"
    lines = [
        f"{title}: medians of {len(reference)} rounds",
        f"  {'OPERATION':<22}{'CPU MS/OP':>10}{'VS RECIPE POP':>15}{'CALLING THREAD MS':>19}",
    ]
    for name in OPERATIONS:
        ms = statistics.median(spent[0] for spent in rounds[name])
        ratio = statistics.median(spent[0] / ref for spent, ref in zip(rounds[name], reference))
        thread = statistics.median(spent[1] for spent in rounds[name])
        lines.append(f"  {name:<22}{ms:>10.3f}{ratio:>14.2f}x{thread:>19.3f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES), help="foundationdb, embedded or both")
    parser.add_argument("--ops", type=int, default=300, help="calls of each operation per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", metavar="FILE", help="then profile each operation, into FILE")
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "STORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.ops, args.rounds, bool(args.profile))
        return 0
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if any(e not in ENGINES for e in engines):
        parser.error(f"--engines takes {' and '.join(ENGINES)}")
    tables, profiles = [], []
    for engine in engines:
        result = measure(engine, args)
        tables.append(table(engine, result["rounds"]))
        for name, text in result["profiles"].items():
            profiles.append(f"{engine}, {name} (cProfile, {args.ops * args.rounds:,} calls):\n{text}\n")
    print("\n\n".join(tables))
    if args.profile:
        with open(args.profile, "w") as out:
            out.write("\n".join(profiles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
