"""``python -m django_fdbqueue.testing.bindingtester``: the binding tester on both engines, seed by seed.

For each seed the driver runs once against the embedded engine (a fresh store) and once against
a cluster (a throwaway local one this command starts and stops, or ``--cluster-file``), and the
two runs' results are compared entry by entry; the first differences are printed. With
``--embedded-only`` only the embedded run is made, and a seed passes when the driver completes
and its own checks pass. The how-to: docs/howto/binding-tester.md.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from .. import binaries
from ..cluster import ClusterError, LocalCluster
from . import EMBEDDED
from .results import compare, load
from .runs import TESTS, DriverRun, Plan, Target, TesterNotFound, dump_results, find_tester, run_driver
from .runs import write_python_wrapper

#: What a seed's comparison may come to.
SAME, PERMISSIBLE, DIFFERENT, FAILED, COMPLETED = "same", "permissible", "different", "failed", "completed"
#: The outcomes that count as a pass.
PASSING = (SAME, COMPLETED)
TENANT_MODE = "configure tenant_mode=optional_experimental"


@dataclass
class Outcome:
    """One seed's verdict, and what to show for it."""

    seed: int
    verdict: str
    detail: str = ""
    seconds: float = 0.0
    entries: int = 0

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING


def _tail(run: DriverRun, lines: int = 25) -> str:
    why = "timed out" if run.timed_out else f"exit status {run.returncode}"
    return f"({why})\n" + "\n".join(run.output.strip().splitlines()[-lines:])


def _run_one(root: Path, plan: Plan, target: Target, work: Path) -> tuple[Path | None, str]:
    """Run the driver on one target and read its results; (results file, "") or (None, why)."""
    run = run_driver(root, plan, target, work)
    if not run.ok:
        return None, f"{target.engine}: the driver failed {_tail(run)}"
    out = work / f"{target.engine}-{plan.seed}.json"
    read = dump_results(root, plan, target, work, out)
    if not read.ok:
        return None, f"{target.engine}: reading the results failed {_tail(read)}"
    return out, ""


def run_seed(root: Path, plan: Plan, targets: list[Target], work: Path, show: int = 5) -> Outcome:
    """Run one seed on every target, and compare the first two targets' results."""
    started = time.monotonic()
    files = []
    for target in targets:
        path, problem = _run_one(root, plan, target, work)
        if path is None:
            return Outcome(plan.seed, FAILED, problem, time.monotonic() - started)
        files.append(path)
    if len(files) == 1:
        return Outcome(plan.seed, COMPLETED, seconds=time.monotonic() - started)
    found = compare(load(files[0]), load(files[1]), values=plan.concurrency == 1)
    for path in files:
        path.unlink()
    seconds = time.monotonic() - started
    names = (targets[0].engine, targets[1].engine)
    if not found.differences:
        return Outcome(plan.seed, SAME, seconds=seconds, entries=found.entries)
    real = found.real_differences
    verdict = DIFFERENT if real else PERMISSIBLE
    shown = (real or found.differences)[:show]
    detail = f"{len(real)} difference(s), {len(found.differences) - len(real)} permissible:\n"
    detail += "\n".join(d.describe(names) for d in shown)
    return Outcome(plan.seed, verdict, detail, seconds, found.entries)


@contextlib.contextmanager
def cluster_target(cluster_file: str | None) -> Iterator[Target]:
    """The cluster side: the one named, or a throwaway local cluster started (and stopped) here.

    The driver clears the whole database before each test, so a named cluster must be one whose
    data may go, and it must allow tenants (``configure tenant_mode=optional_experimental``).
    """
    found = binaries.find(need_library=True)
    if cluster_file:
        yield Target("foundationdb", cluster_file, found.library)
        return
    cluster = LocalCluster(binaries=found)
    cluster.start()
    try:
        configured = cluster.cli(TENANT_MODE, timeout=30)
        if configured.returncode != 0:
            raise ClusterError(f"'{TENANT_MODE}' failed: {(configured.stdout + configured.stderr).strip()}")
        yield Target("foundationdb", cluster.cluster_file, found.library)
    finally:
        cluster.stop()


def run_seeds(
    root: Path,
    plans: list[Plan],
    cluster: Target | None,
    report: Callable[[Outcome], None] = lambda outcome: None,
    show: int = 5,
) -> list[Outcome]:
    """Run each plan (a seed) on a fresh embedded store, and on the cluster when there is one."""
    work = Path(tempfile.mkdtemp(prefix="fdbqueue-bindingtester-"))
    outcomes = []
    try:
        write_python_wrapper(work)
        for plan in plans:
            store = work / f"store-{plan.seed}.sqlite3"
            targets = [Target(EMBEDDED, str(store))] + ([cluster] if cluster is not None else [])
            outcome = run_seed(root, plan, targets, work, show)
            for leftover in work.glob(f"store-{plan.seed}.sqlite3*"):
                leftover.unlink()
            report(outcome)
            outcomes.append(outcome)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return outcomes


def fresh_seeds(count: int) -> list[int]:
    """Seeds no one chose: a new sample each run (print them, so a failure can be run again)."""
    chooser = random.SystemRandom()
    return [chooser.randrange(2**32) for _ in range(count)]


def _print_outcome(outcome: Outcome) -> None:
    line = f"seed {outcome.seed}: {outcome.verdict} ({outcome.seconds:.1f} s"
    line += f", {outcome.entries} entries)" if outcome.entries else ")"
    print(line, flush=True)
    if outcome.detail:
        print(outcome.detail, flush=True)


def summary(test: str, concurrency: int, outcomes: list[Outcome]) -> str:
    """One line: how many seeds came to each verdict."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.verdict] = counts.get(outcome.verdict, 0) + 1
    parts = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
    return f"{test} (concurrency {concurrency}): {len(outcomes)} seed(s): {parts or 'none'}"


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="python -m django_fdbqueue.testing.bindingtester",
        description="Run FoundationDB's binding tester on the embedded engine and on a cluster, "
        "seed by seed, and compare the two runs' results.",
    )
    parse.add_argument("test", choices=TESTS, help="the driver's test")
    parse.add_argument("--seed", type=int, action="append", default=[], help="a seed to run (repeatable)")
    parse.add_argument("--seeds", type=int, default=0, help="run this many seeds")
    parse.add_argument("--first-seed", type=int, default=None, help="with --seeds: S, S+1, ... (default: fresh)")
    parse.add_argument("--num-ops", type=int, default=100, help="operations per tester thread (default 100)")
    parse.add_argument("--concurrency", type=int, default=1, help="tester threads (default 1)")
    parse.add_argument("--api-version", type=int, default=730, help="the API version (default 730)")
    parse.add_argument("--timeout", type=float, default=300.0, help="seconds one driver run may take")
    parse.add_argument("--tester-dir", default=None, help="the binding tester's folder (default: see the how-to)")
    parse.add_argument("--cluster-file", default=None, help="a cluster whose data may be cleared (default: start one)")
    parse.add_argument("--embedded-only", action="store_true", help="run on the embedded engine only")
    parse.add_argument("--show", type=int, default=5, help="differences printed per seed (default 5)")
    return parse


def choose_seeds(args: argparse.Namespace) -> list[int]:
    seeds = list(args.seed)
    if args.seeds:
        first = args.first_seed
        seeds += list(range(first, first + args.seeds)) if first is not None else fresh_seeds(args.seeds)
    return seeds or fresh_seeds(1)


def main(argv: list[str] | None = None) -> int:
    """Run the seeds asked for; exit status 0 when every seed passed, 1 otherwise, 2 on a setup error."""
    args = parser().parse_args(argv)
    seeds = choose_seeds(args)
    try:
        root = find_tester(args.tester_dir)
        plans = [
            Plan(args.test, seed, args.num_ops, args.concurrency, args.api_version, args.timeout) for seed in seeds
        ]
        print(f"{args.test}: seeds {' '.join(map(str, seeds))}", flush=True)
        if args.embedded_only:
            outcomes = run_seeds(root, plans, None, _print_outcome, args.show)
        else:
            with cluster_target(args.cluster_file) as cluster:
                outcomes = run_seeds(root, plans, cluster, _print_outcome, args.show)
    except (TesterNotFound, binaries.BinariesNotFound, ClusterError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(summary(args.test, args.concurrency, outcomes), flush=True)
    return 0 if all(outcome.passed for outcome in outcomes) else 1
