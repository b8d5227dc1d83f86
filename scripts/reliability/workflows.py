"""Workflows bench: a chord's callback runs exactly once while workers are killed; what fan-in costs.

    .venv/bin/python scripts/reliability/workflows.py                  # every section, full size
    .venv/bin/python scripts/reliability/workflows.py --runs 100 --members 1000 --threads 16 --processes 2
    .venv/bin/python scripts/reliability/workflows.py --rates          # chord vs lone tasks, same workers
    .venv/bin/python scripts/reliability/workflows.py --chain 100      # commits a chain link adds
    .venv/bin/python scripts/reliability/workflows.py --big 10000      # one 10,000-member chord
    .venv/bin/python scripts/reliability/workflows.py --engine embedded --runs 2 --members 40 --chain 10

The goals of the workflows issue, measured. By default on a one-process FoundationDB cluster on
loopback whose commits take 5 ms (``--engine cluster``; binaries through ``FDB_HOME``), or with
``--engine embedded`` on the embedded engine's file. A section option runs that section alone
(several may be given); none runs them all at full size. The task workers are ``--processes``
``manage.py fdbqueue worker --tasks`` processes sharing ``--threads`` threads, started once and
kept for every section but the chain's; their task lease is ``--lease`` seconds.

1. **Kill loop** (``--runs N``): each run enqueues a chord of ``--members`` members (member i
   returns i) and a callback that records each start in a file of the run's directory and sums
   the members' results (``predecessor_results``). At a random moment, uniform over a warm-up
   chord's length (seeded by ``--seed``, printed), one worker process is SIGKILLed and another
   started at once. Checks per run: the workflow SUCCESSFUL, every member SUCCESSFUL, the
   callback started once (a kill that lands inside the callback itself makes it run again, as any
   task whose worker dies: such runs are counted apart), its sum right, the task queue empty.
2. **Fan-in rate** (``--rates``): ``--rate-tasks`` lone tasks against a chord of as many members,
   alternately, ``--rate-rounds`` times each: tasks/s from the moment all are ready to the last
   member's finish, and the CPU per task of the workers and (on a cluster) of fdbserver.
3. **Commits per chain link** (``--chain N``): N lone tasks, then a chain of N, each run by one
   worker thread, counting the store's commits while it runs (see ``workflow_store``).
4. **Big chord** (``--big N``): one chord of N members completes, its callback once.

Exit code 0 when every check passed, 1 when one failed, 2 when the run could not finish. The
issue's goals (the rate ratio, commits per link, ...) are printed as met or not: they are figures
of this machine, not checks. Modules beside this one: ``workflow_store`` (the store, commits,
CPU), ``workflow_kills`` (the workers, the kill loop), ``workflow_rates`` (the other sections),
``workflow_bench_tasks`` (the tasks the workers run).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import Children, log  # noqa: E402
from load_checks import Checks  # noqa: E402
from workflow_kills import WorkerPool, kill_loop  # noqa: E402
from workflow_rates import big_chord, chain_commits, rates  # noqa: E402
from workflow_report import goals, render  # noqa: E402
from workflow_store import open_store  # noqa: E402

FULL = {"runs": 100, "chain": 100, "big": 10_000}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from django_fdbqueue.testing.cluster import parse_latency

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", choices=("cluster", "embedded"), default="cluster", help="Default: cluster.")
    parser.add_argument("--runs", type=int, help="Kill loop: this many runs (full size: 100).")
    parser.add_argument(
        "--budget", type=float, help="Kill loop: start no run after this many seconds of it (default: no limit)."
    )
    parser.add_argument("--rates", action="store_true", help="Fan-in rate: lone tasks vs a chord's members.")
    parser.add_argument("--chain", type=int, help="Commits per chain link, with a chain this long (full: 100).")
    parser.add_argument("--big", type=int, help="One chord of this many members (full size: 10,000).")
    parser.add_argument("--members", type=int, default=1000, help="Members of a kill run's chord (default 1000).")
    parser.add_argument("--threads", type=int, default=16, help="Worker threads in all (default 16).")
    parser.add_argument("--processes", type=int, default=2, help="Worker processes sharing them (default 2).")
    parser.add_argument(
        "--spread",
        type=int,
        default=16,
        help="Workers' --spread: claim one of the first K ready (default 16; 0: exact).",
    )
    parser.add_argument("--lease", type=float, default=3.0, help="The tasks' lease in seconds (default 3).")
    parser.add_argument("--rate-tasks", type=int, default=1000, help="Tasks of a rate row (default 1000).")
    parser.add_argument("--rate-rounds", type=int, default=3, help="Rows of each kind (default 3).")
    parser.add_argument(
        "--idle-seconds", type=float, default=5.0, help="Chain section: the idle window counted first (default 5)."
    )
    parser.add_argument(
        "--commit-latency", type=parse_latency, default=0.005, help="The cluster's commit latency (default 5ms)."
    )
    parser.add_argument("--seed", type=int, help="Seed of the kill moments and victims (default: random, printed).")
    parser.add_argument("--json", action="store_true", help="Print the report as one JSON document.")
    parser.add_argument("--keep", action="store_true", help="Keep the run's directory (store, logs).")
    args = parser.parse_args(argv)
    if args.runs is None and args.chain is None and args.big is None and not args.rates:
        args.runs, args.chain, args.big, args.rates = FULL["runs"], FULL["chain"], FULL["big"], True
    args.runs, args.chain, args.big = args.runs or 0, args.chain or 0, args.big or 0
    if min(args.runs, args.chain, args.big) < 0 or args.members < 1 or args.rate_tasks < 1 or args.rate_rounds < 1:
        parser.error("--runs, --chain and --big are not negative; --members, --rate-tasks, --rate-rounds positive")
    if args.processes < 1 or args.threads < args.processes or args.lease <= 0:
        parser.error("--processes and --lease must be positive, --threads at least --processes")
    if args.spread == 1 or args.spread < 0:
        parser.error("--spread is 0 (exact claims) or from 2")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    return args


def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    """Every section asked for, on one store; the report (figures, checks, goals)."""
    load_before = os.getloadavg()
    log(
        f"seed {args.seed}; load average before the run: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}"
    )
    report: dict[str, Any] = {"config": config(args, load_before)}
    with open_store(args.engine, directory, args.lease, args.commit_latency) as store:
        report["store_latency"] = store.latency
        with Children(directory) as children:
            pool = WorkerPool(children, store.env, args.processes, args.threads, args.spread or None)
            if args.chain:  # first, while no other worker runs: only its own commits are counted
                report["chain"] = chain_commits(children, store, pool, args)
            if args.rates or args.runs or args.big:
                log(f"starting {args.processes} worker processes of {pool.per_process} threads")
                pool.start()
                pool.wait_ready(directory)
                if args.rates:
                    report["rates"] = rates(pool, store, args, directory)
                if args.runs:
                    report["kill_loop"] = kill_loop(pool, args, directory)
                if args.big:
                    report["big"] = big_chord(pool, args, directory)
                pool.wait_ready(directory)  # replacements too: every worker is up, then stopped
                report["workers_stopped"] = pool.stop()
    report["checks"] = checks(report)
    report["ok"] = all(check["ok"] for check in report["checks"])
    report["goals"] = goals(report, args)
    return report


def config(args: argparse.Namespace, load_before: tuple[float, float, float]) -> dict[str, Any]:
    return {
        "engine": args.engine,
        "commit_latency_ms": args.commit_latency * 1000 if args.engine == "cluster" else None,
        "runs": args.runs,
        "kill_loop_budget_s": args.budget,
        "members": args.members,
        "rates": args.rates,
        "rate_tasks": args.rate_tasks,
        "rate_rounds": args.rate_rounds,
        "chain": args.chain,
        "big": args.big,
        "threads": args.threads,
        "processes": args.processes,
        "threads_per_process": max(1, args.threads // args.processes),
        "spread": args.spread or None,
        "task_lease_s": args.lease,
        "seed": args.seed,
        "cpus": os.cpu_count(),
        "load_before": [round(value, 2) for value in load_before],
    }


def checks(report: dict[str, Any]) -> list[dict[str, Any]]:
    """What must hold whatever the machine: statuses, the callback's starts and sum, empty queues."""
    found = Checks()
    if "kill_loop" in report:
        _kill_checks(found, report["kill_loop"])
    if "rates" in report:
        summary = report["rates"]["summary"]
        found.add(
            "every task of the rate rows SUCCESSFUL",
            summary["not_successful"] == 0,
            f"{len(report['rates']['rows'])} rows of {report['rates']['tasks']} tasks; "
            f"{summary['not_successful']} not SUCCESSFUL",
        )
    if "chain" in report:
        chain = report["chain"]
        found.add(
            "the chain ran in order, every task SUCCESSFUL",
            chain["chain_status"] == "SUCCESSFUL" and chain["not_successful"] == 0 and chain["chain_in_order"],
            f"chain {chain['chain_status']}, {chain['not_successful']} of {2 * chain['links']} tasks not SUCCESSFUL, "
            f"each link started after the one before it finished: {chain['chain_in_order']}",
        )
    if "big" in report:
        big = report["big"]
        found.add(
            "the big chord completed, its callback once with the right sum",
            big["status"] == "SUCCESSFUL"
            and big["members_not_successful"] == 0
            and big["callback_starts"] == 1
            and big["callback_ok"]
            and not any(big["queue_left"].values()),
            f"{big['members']} members: {big['status']}, {big['members_not_successful']} not SUCCESSFUL, "
            f"callback started {big['callback_starts']}x, result right: {big['callback_ok']}, queue left {big['queue_left']}",
        )
    if "workers_stopped" in report:
        codes = report["workers_stopped"]
        found.add(
            "the workers stopped gracefully",
            all(code == 0 for code in codes.values()),
            ", ".join(f"{pid} exit {code}" for pid, code in codes.items()),
        )
    return found.items


def _kill_checks(found: Checks, loop: dict[str, Any]) -> None:
    runs = loop["runs"]
    numbered = list(enumerate(runs, 1))
    bad_status = [n for n, run in numbered if run["status"] != "SUCCESSFUL" or run["members_not_successful"]]
    found.add(
        "every run's workflow and members SUCCESSFUL",
        not bad_status,
        f"{len(runs)} runs; not so: {bad_status or 'none'}",
    )
    twice = [n for n, run in numbered if run["callback_starts"] != 1 and not run["killed_in_callback"]]
    inside = [n for n, run in numbered if run["killed_in_callback"]]
    found.add(
        "the callback started exactly once in every run",
        not twice,
        f"{sum(run['callback_starts'] for run in runs)} starts in {len(runs)} runs; more or fewer: {twice or 'none'}; "
        f"killed inside the callback (so started again, as any task whose worker dies): {inside or 'none'}",
    )
    wrong = [n for n, run in numbered if not run["callback_ok"]]
    found.add("the callback's result right in every run", not wrong, f"wrong or missing: {wrong or 'none'}")
    left = [n for n, run in numbered if any(run["queue_left"].values())]
    found.add("the task queue empty after every run", not left, f"not empty: {left or 'none'}")


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, parse_args, run, render, stop_on_term=True)


if __name__ == "__main__":
    sys.exit(main())
