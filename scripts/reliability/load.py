"""Load run: the demo under gunicorn, many HTTP clients, a task worker; then check nothing was lost.

    .venv/bin/python scripts/reliability/load.py                       # 60 s, 16 clients
    .venv/bin/python scripts/reliability/load.py --duration 10 --json  # CI size, JSON report
    .venv/bin/python scripts/reliability/load.py --faults 0.06         # 1020/1021 on 6% of commits
    .venv/bin/python scripts/reliability/load.py --kill --lease 4      # SIGKILL mid-run

What one run does, in a fresh temp directory (embedded store, Django database, journals, logs):

1. Migrates the run's Django database, creates a user and one API token (django-rest-knox) per
   client, and the queues: two FIFO, two priority (one with ``max_attempts=2`` for dead letters).
2. Starts gunicorn (gthread workers) on a free loopback port, ``manage.py fdbqueue worker
   --tasks``, a process that enqueues the demo's tasks, and the client processes (``client.py``),
   whose threads push (some with ``dedup_key``, some delayed, some in batches), pop, claim, ack,
   release, abandon leases, and read, each journaling every request.
3. With ``--faults``, every child's engine fails that fraction of its commits: 1020, 1021 that
   applied, and 1021 that did not, in equal parts (or as ``--fault-kinds`` says). Clients then
   push only with ``dedup_key`` and consume only with claim and ack: the guarantees page of the
   docs says why (a plain pop under 1021 may lose its item and a plain push may store it twice).
4. With ``--kill``, SIGKILLs one gunicorn worker, the task worker (and starts another) and one
   client process at fixed points of the run; clients then behave as under ``--faults``.
5. After the run: a snapshot of every queue (ready, leased, delayed, dead letters), the checks
   below, then a drain that claims and acks whatever is left (leased items must come back once
   their lease ends), the task results, and SQLite's ``PRAGMA integrity_check``.

The checks (all must pass; exit code 1 otherwise): no 5xx; no status an operation does not
document; every confirmed push consumed exactly once or still queued; no item popped or acked
twice, none both consumed and still queued, none from nowhere; the queues' counters agree with
their contents (pushed = popped/acked + ready + leased + delayed + dead); abandoned and killed
leases come back; after the drain every item was consumed exactly once; every task SUCCESSFUL or
still pending; the store passes its integrity check; with faults, faults were injected.

Operations in doubt are accounted, not excused: a push whose answer never came may or may not
exist (if it exists, it exists once), and an ack whose answer was lost may have removed its item.

This script is the load run itself (its processes, the schedule of backups and kills); beside it,
``load_journals`` reads what the clients journaled, ``load_store`` reads the store back after the
run, ``load_checks`` holds the checks and ``load_report`` the report.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import Children, RunEnv, RunFailed, log  # noqa: E402
from load_checks import (  # noqa: E402
    Checks,
    account,
    backup_checks,
    final_checks,
    overlapping_deliveries,
    task_checks,
)
from load_journals import read_journals  # noqa: E402
from load_report import operation_figures, render  # noqa: E402
from load_store import QUEUES, drain, integrity_check, online_backup, take_snapshot, wait_for_tasks  # noqa: E402

# ``overlapping_deliveries`` and ``read_journals`` are this script's too, for the tests that check them.
__all__ = ["main", "overlapping_deliveries", "parse_args", "read_journals", "render", "run"]

FAULT_KINDS = ("not_committed", "unknown_applied", "unknown_not_applied")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=60.0, help="Seconds of load (default 60).")
    parser.add_argument("--clients", type=int, default=16, help="Concurrent HTTP clients, threads (default 16).")
    parser.add_argument("--processes", type=int, default=4, help="Client processes sharing them (default 4).")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes (default 4).")
    parser.add_argument("--threads", type=int, default=4, help="Threads per gunicorn worker (default 4).")
    parser.add_argument("--lease", type=float, default=10.0, help="Clients' claim lease in seconds (default 10).")
    parser.add_argument("--task-rate", type=float, default=10.0, help="Tasks enqueued per second (default 10).")
    parser.add_argument(
        "--task-lease",
        type=float,
        default=5.0,
        help="The tasks backend's LEASE in seconds (default 5: a lease a fault or a kill leaves behind ends soon).",
    )
    parser.add_argument(
        "--faults",
        type=float,
        default=0.0,
        help="Fraction of commits that fail, split over --fault-kinds (default 0: none).",
    )
    parser.add_argument(
        "--fault-kinds",
        default=",".join(FAULT_KINDS),
        help=f"Which faults, comma-separated (default: all of {', '.join(FAULT_KINDS)}).",
    )
    parser.add_argument(
        "--kill", action="store_true", help="SIGKILL a gunicorn worker, the task worker and a client process mid-run."
    )
    parser.add_argument("--seed", default="1", help="Seed of the clients' random choices.")
    parser.add_argument("--json", action="store_true", help="Print the report as one JSON document.")
    parser.add_argument("--keep", action="store_true", help="Keep the run's directory (store, journals, logs).")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.processes < 1 or args.duration <= 0:
        parser.error("--clients, --processes and --duration must be positive")
    if args.kill and args.processes < 2:
        parser.error("--kill needs at least 2 client processes (one is killed)")
    kinds = [kind.strip() for kind in args.fault_kinds.split(",") if kind.strip()]
    unknown = set(kinds) - set(FAULT_KINDS)
    if unknown or not kinds:
        parser.error(f"--fault-kinds: choose from {', '.join(FAULT_KINDS)}")
    if not 0.0 <= args.faults <= 1.0:
        parser.error("--faults is a fraction from 0 to 1")
    args.fault_config = {kind: args.faults / len(kinds) for kind in kinds} if args.faults else None
    return args


# -- the run ----------------------------------------------------------------------------------


def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    """Do the whole run in ``directory``; the report (figures, accounting, checks)."""
    return LoadRun(args, directory).run()


class LoadRun:
    """One load run: the servers, the clients and the task producer, the schedule of a backup and
    kills while they run, then the checks on what they journaled and what the store holds."""

    def __init__(self, args: argparse.Namespace, directory: Path) -> None:
        self.args = args
        self.directory = directory
        self.env = RunEnv(directory, faults=args.fault_config, task_lease=args.task_lease)
        self.journal_dir = directory / "journals"
        self.safe = bool(args.fault_config) or args.kill
        self.checks = Checks()
        self.kills: list[dict[str, Any]] = []
        self.backup: dict[str, Any] = {}

    def run(self) -> dict[str, Any]:
        args = self.args
        self.journal_dir.mkdir()
        log(f"setting up in {self.directory}")
        harness.setup_django(self.env)
        from django_fdbqueue import service
        from django_fdbqueue.connection import get_database

        db = get_database()
        for queue in QUEUES:
            service.create_queue(db, queue["name"], queue["kind"], max_attempts=queue["max_attempts"])
        prefix, tokens = harness.make_user_and_tokens(args.clients)

        with Children(self.directory) as children:
            self.children = children
            self.server = harness.start_server(children, self.env, workers=args.workers, threads=args.threads)
            log(f"gunicorn on {self.server.base_url}: {args.workers} workers x {args.threads} threads")
            harness.warm_up(self.server, {"Authorization": f"{prefix} {tokens[0]}"})
            self.task_workers = [self._start_task_worker()]
            start_at, end_at = self._start_clients(prefix, tokens)
            self._drive(start_at, end_at)
            self._wait_for_clients(end_at)
            results = self._check_store(service, db)
            self._stop_servers()

        from django_fdbqueue import connection

        connection.reset_database()
        integrity = integrity_check(self.env.store_path)
        self.checks.add("SQLite integrity_check", integrity == "ok", f"PRAGMA integrity_check: {integrity}")
        if self.backup:
            backup_checks(self.backup, self.checks)
        faults = self.env.fault_counts()
        if self.env.faults:
            self.checks.add(
                "faults were injected",
                sum(faults.get(kind, 0) for kind in self.env.faults) > 0,
                f"injected (processes that exited cleanly): {faults}",
            )
        return self._report(*results, faults)

    def _start_task_worker(self) -> harness.Child:
        return self.children.start(
            "task-worker", harness.manage("fdbqueue", "worker", "--tasks", "--concurrency", "2"), self.env.environ()
        )

    def _start_clients(self, prefix: str, tokens: list[str]) -> tuple[float, float]:
        """Start the client processes and the task producer; when their load starts and ends."""
        args, directory, children, env = self.args, self.directory, self.children, self.env
        processes = min(args.processes, args.clients)
        # The clients spread as evenly as they go: 16 over 4 processes is 4 threads each.
        counts = [args.clients // processes + (index < args.clients % processes) for index in range(processes)]
        start_at = time.time() + 1.0  # every client process is up by then
        end_at = start_at + args.duration
        config = {
            "base_url": self.server.base_url,
            "auth_prefix": prefix,
            "tokens": tokens,
            "queues": QUEUES,
            "safe": self.safe,
            "lease": args.lease,
            "seed": args.seed,
            "journal_dir": str(self.journal_dir),
            "end_at": end_at,
            "start_at": start_at,
        }
        config_path = directory / "clients.json"
        self.clients = []
        for index in range(processes):
            client_config = {**config, "threads": counts[index], "first_token": sum(counts[:index])}
            if args.kill and index == 0:
                client_config["work"] = [0.2, 1.0]  # the consumer to kill: it holds leases while it works
            path = directory / f"client-{index}.json"
            path.write_text(json.dumps(client_config), encoding="utf-8")
            self.clients.append(
                children.start(
                    f"client-{index}",
                    [harness.PYTHON, str(harness.SCRIPTS_DIR / "client.py"), str(path), str(index)],
                    env.environ(),
                )
            )
        config_path.write_text(json.dumps({**config, "tokens": len(tokens)}), encoding="utf-8")
        self.producer = children.start(
            "task-producer",
            [
                harness.PYTHON,
                str(harness.SCRIPTS_DIR / "task_producer.py"),
                str(self.journal_dir / "tasks.jsonl"),
                str(args.task_rate),
                str(end_at),
            ],
            env.environ(),
        )
        log(
            f"load: {args.clients} clients in {processes} processes for {args.duration:g} s"
            + (f", faults {env.faults}" if env.faults else "")
            + (", with kills" if args.kill else "")
        )
        return start_at, end_at

    def _drive(self, start_at: float, end_at: float) -> None:
        """While the load runs: the online backup at half time, and with --kill the kills around it."""
        schedule = [(0.50, "backup")]
        if self.args.kill:
            schedule = [(0.30, "gunicorn-worker"), (0.45, "task-worker"), (0.50, "backup"), (0.60, "client")]
        while time.time() < end_at:
            elapsed = (time.time() - start_at) / self.args.duration
            while schedule and elapsed >= schedule[0][0]:
                _, target = schedule.pop(0)
                if target == "backup":
                    self.backup = online_backup(self.env.store_path, self.directory / "backup.sqlite3")
                else:
                    self.kills.append(
                        kill(target, self.server, self.task_workers, self.clients, self.children, self.env)
                    )
            if not self.server.child.alive():
                raise RunFailed(f"gunicorn died:\n{self.server.child.tail()}")
            time.sleep(0.05)

    def _wait_for_clients(self, end_at: float) -> None:
        log("load over; waiting for the clients")
        clients, producer = self.clients, self.producer
        for child in clients + [producer]:
            try:
                child.process.wait(max(5.0, 4 * 30 + 20 - (time.time() - end_at)))
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: killed, and reported below
                child.kill()
        killed_clients = {event["pid"] for event in self.kills if event["target"] == "client"}
        bad_exits = [
            f"{child.name} exited with {child.process.returncode}"
            for child in clients + [producer]
            if child.pid not in killed_clients and child.process.returncode != 0
        ]
        self.checks.add(
            "client processes ended cleanly",
            not bad_exits,
            "; ".join(bad_exits)
            or f"{len(clients)} client processes and the task producer exited with 0"
            + (f" (client pid {', '.join(map(str, killed_clients))} was killed on purpose)" if killed_clients else ""),
        )

    def _check_store(self, service: Any, db: Any) -> tuple[dict[str, Any], ...]:
        """The journals against the store, the drain, the tasks: (journal, snapshot, drained, tasks)."""
        args, checks = self.args, self.checks
        journal = read_journals(self.journal_dir)
        killed_tasks = [event["running_task"] for event in self.kills if "running_task" in event]
        tasks = wait_for_tasks(journal["task_ids"] + killed_tasks, args.task_lease + 30.0)
        log("tasks done; checking the store")
        snapshot = take_snapshot(service, db)
        account(journal, snapshot, checks, self.safe, self.kills)
        drained = drain(service, db, args.lease + 15.0)
        log(f"drained in {drained['summary']['seconds']} s")
        final_checks(journal, snapshot, drained, self.kills, checks)
        task_checks(journal, tasks, killed_tasks, checks)
        return journal, snapshot, drained, tasks

    def _stop_servers(self) -> None:
        log("stopping the task worker and gunicorn")
        codes = {child.name: child.stop() for child in self.task_workers if child.alive()}
        codes["gunicorn"] = self.server.child.stop(30.0)
        self.checks.add(
            "servers stopped gracefully",
            all(code == 0 for code in codes.values()),
            ", ".join(f"{name} exit {code}" for name, code in codes.items()),
        )

    def _report(
        self,
        journal: dict[str, Any],
        snapshot: dict[str, Any],
        drained: dict[str, Any],
        tasks: dict[str, Any],
        faults: dict[str, Any],
    ) -> dict[str, Any]:
        args = self.args
        operations, total = operation_figures(journal["figures"], args.duration)
        return {
            "config": {
                "duration_s": args.duration,
                "clients": args.clients,
                "client_processes": len(self.clients),
                "gunicorn_workers": args.workers,
                "gunicorn_threads": args.threads,
                "lease_s": args.lease,
                "task_rate": args.task_rate,
                "task_lease_s": args.task_lease,
                "faults": self.env.faults,
                "kill": args.kill,
                "safe_mode": self.safe,
                "queues": [queue["name"] for queue in QUEUES],
                "cpus": os.cpu_count(),
            },
            "operations": operations,
            "total": total,
            "accounting": journal["accounting"],
            "snapshot": snapshot["counts"],
            "drain": drained["summary"],
            "tasks": tasks["summary"],
            "faults_injected": faults,
            "kills": self.kills,
            "backup": {key: value for key, value in self.backup.items() if key != "path"},
            "checks": self.checks.items,
            "ok": self.checks.ok,
        }


def kill(
    target: str,
    server: harness.Server,
    task_workers: list[harness.Child],
    clients: list[harness.Child],
    children: Children,
    env: RunEnv,
) -> dict[str, Any]:
    """SIGKILL one process of ``target``'s kind; a killed task worker is replaced at once."""
    at = time.time()
    if target == "gunicorn-worker":
        pids = server.worker_pids()
        if not pids:
            raise RunFailed("no gunicorn worker to kill")
        pid = pids[0]
        os.kill(pid, signal.SIGKILL)
        # gunicorn's master starts a new worker in its place.
        harness.wait_until(
            lambda: pid not in server.worker_pids() and len(server.worker_pids()) >= server.workers,
            30.0,
            "gunicorn to replace its killed worker",
        )
        event = {"target": target, "pid": pid, "replaced_after_s": round(time.time() - at, 2)}
    elif target == "task-worker":
        # A task that sleeps, so the kill catches it RUNNING: it must come back after its lease.
        import reliability_tasks
        from django_fdbqueue.connection import get_database
        from django_fdbqueue.tasks import results

        held = reliability_tasks.hold.enqueue(3.0).id
        harness.wait_until(
            lambda: results.get(get_database(), held).status == "RUNNING",
            20.0,
            "the task worker to start the task it is killed in",
        )
        victim = task_workers[-1]
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(10)
        task_workers.append(
            children.start(
                "task-worker", harness.manage("fdbqueue", "worker", "--tasks", "--concurrency", "2"), env.environ()
            )
        )
        event = {"target": target, "pid": victim.pid, "replaced_by": task_workers[-1].pid, "running_task": held}
    else:
        victim = clients[0]
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(10)
        event = {"target": target, "pid": victim.pid}
    event["t"] = round(at, 4)
    log(f"killed {target} (pid {event['pid']})")
    return event


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, parse_args, run, render)


if __name__ == "__main__":
    sys.exit(main())
