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
   push only with ``dedup_key`` and consume only with claim and ack: the README documents that a
   plain pop under 1021 may lose its item and a plain push may store it twice.
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
"""

from __future__ import annotations

import argparse
import collections
from dataclasses import dataclass
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import Children, OpFigures, RunEnv, RunFailed, log  # noqa: E402

QUEUES = [
    {"name": "load.fifo.1", "kind": "fifo", "max_attempts": None},
    {"name": "load.fifo.2", "kind": "fifo", "max_attempts": None},
    {"name": "load.prio.1", "kind": "priority", "max_attempts": None},
    {"name": "load.prio.2", "kind": "priority", "max_attempts": 2},
]
FAULT_KINDS = ("not_committed", "unknown_applied", "unknown_not_applied")
# The statuses each operation may answer; anything else is a finding.
EXPECTED = {
    "push": {200, 201},
    "batch": {201},
    "pop": {200, 204},
    "claim": {200, 204},
    "ack": {204, 409},
    "release": {200, 409},
    "stats": {200},
    "peek": {200, 204},
}
OPERATION_ORDER = ["push", "batch", "pop", "claim", "ack", "release", "peek", "stats"]
# Seconds after a gunicorn worker's SIGKILL in which clients may see its connections drop.
TRANSPORT_ERROR_WINDOW = 5.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0, help="Seconds of load (default 60).")
    parser.add_argument("--clients", type=int, default=16, help="Concurrent HTTP clients, threads (default 16).")
    parser.add_argument("--processes", type=int, default=4, help="Client processes sharing them (default 4).")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes (default 4).")
    parser.add_argument("--threads", type=int, default=4, help="Threads per gunicorn worker (default 4).")
    parser.add_argument("--lease", type=float, default=10.0, help="Clients' claim lease in seconds (default 10).")
    parser.add_argument("--task-rate", type=float, default=10.0, help="Tasks enqueued per second (default 10).")
    parser.add_argument("--task-lease", type=float, default=5.0,
                        help="The tasks backend's LEASE in seconds (default 5: a lease a fault or a kill leaves behind ends soon).")
    parser.add_argument("--faults", type=float, default=0.0,
                        help="Fraction of commits that fail, split over --fault-kinds (default 0: none).")
    parser.add_argument("--fault-kinds", default=",".join(FAULT_KINDS),
                        help=f"Which faults, comma-separated (default: all of {', '.join(FAULT_KINDS)}).")
    parser.add_argument("--kill", action="store_true",
                        help="SIGKILL a gunicorn worker, the task worker and a client process mid-run.")
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


@dataclass(frozen=True)
class Take:
    """One event in an item's life as a client saw it: ``at`` when it was journaled, ``took`` how
    long the request lasted, ``lease`` for a claim.

    ``sent`` is the wall clock when the request left (journals older than this field lack it), and
    ``until`` the lease's end as the server set it, from the claim's answer. The journal's ``at``
    comes after the answer by however long the client thread waited for the CPU and the GIL: on a
    loaded machine tens of milliseconds, so ``at - took`` is no bound on when the server acted.
    """

    at: float
    took: float
    lease: float
    source: str
    kind: str  # "pop", "claim", "release", "ack", or "drain" (the driver's claim after the run)
    seq: int = 0  # the line in its journal: order within one source, whatever the clock's rounding
    sent: float | None = None
    until: float | None = None

    @property
    def start(self) -> float:
        """No later than the server acted: the request was not sent before this."""
        return self.sent if self.sent is not None else self.at - self.took

    @property
    def answered(self) -> float:
        """No earlier than the server acted: its answer had arrived by then."""
        return self.sent + self.took if self.sent is not None else self.at


def overlapping_deliveries(timeline: dict[str, list[Take]]) -> list[str]:
    """Items handed to a second consumer while the first surely still held them.

    The server acted on each request between its ``start`` and its ``answered`` time. A claim
    holds its item until its lease ends (``until``, the end the server set; from older journals
    at the earliest ``start + lease``) or its holder releases it (from the moment the release is
    sent), whichever comes first; a pop holds it for good. Two takes of one item are an overlap
    when neither order is possible: each was answered before the other's holding ended. Every
    time here is read from this machine's one clock, which the server's lease ends come from too,
    so no delay of a client thread can make a legitimate second delivery look like an overlap.
    At-least-once allows a second delivery only once a lease ran out or was given back.
    """
    problems = []
    slack = 0.001  # journal times are rounded to 0.1 ms
    for uid, events in timeline.items():
        events = sorted(events, key=lambda event: (event.start, event.seq))
        takes = [event for event in events if event.kind in ("pop", "claim", "drain")]
        for first, second in zip(takes, takes[1:]):
            second_after_first = second.answered + slack >= held_until(first, events)
            first_after_second = first.answered + slack >= held_until(second, events)
            if not second_after_first and not first_after_second:
                problems.append(f"{uid}: {second.kind} by {second.source} answered at {second.answered:.4f} while "
                                f"{first.kind} by {first.source} answered at {first.answered:.4f} held it until "
                                f"{held_until(first, events):.4f}")
    return problems


def held_until(take: Take, events: list[Take]) -> float:
    """When ``take``'s hold on its item ended: its lease's end, or its holder's release."""
    if take.kind == "pop":
        return float("inf")
    end = take.until if take.until is not None else take.start + take.lease
    later = sorted((event for event in events if event.source == take.source and event.seq > take.seq),
                   key=lambda event: event.seq)
    for event in later:  # the holder's own next release of this item, before it took it again
        if event.kind == "release":
            return min(end, event.start)
        if event.kind in ("pop", "claim", "drain"):
            break
    return end


class Checks:
    """The run's verdicts, in the order they were made."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.items.append({"name": name, "ok": bool(ok), "detail": detail})

    @property
    def ok(self) -> bool:
        return all(check["ok"] for check in self.items)


# -- the run ----------------------------------------------------------------------------------


def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    """Do the whole run in ``directory``; the report (figures, accounting, checks)."""
    env = RunEnv(directory, faults=args.fault_config, task_lease=args.task_lease)
    journal_dir = directory / "journals"
    journal_dir.mkdir()
    safe = bool(args.fault_config) or args.kill
    checks = Checks()
    kills: list[dict[str, Any]] = []

    log(f"setting up in {directory}")
    harness.setup_django(env)
    from django_fdbqueue import service
    from django_fdbqueue.connection import get_database

    db = get_database()
    for queue in QUEUES:
        service.create_queue(db, queue["name"], queue["kind"], max_attempts=queue["max_attempts"])
    prefix, tokens = harness.make_user_and_tokens(args.clients)

    with Children(directory) as children:
        server = harness.start_server(children, env, workers=args.workers, threads=args.threads)
        log(f"gunicorn on {server.base_url}: {args.workers} workers x {args.threads} threads")
        harness.warm_up(server, {"Authorization": f"{prefix} {tokens[0]}"})
        task_workers = [children.start("task-worker", harness.manage("fdbqueue", "worker", "--tasks", "--concurrency", "2"),
                                       env.environ())]

        processes = min(args.processes, args.clients)
        # The clients spread as evenly as they go: 16 over 4 processes is 4 threads each.
        counts = [args.clients // processes + (index < args.clients % processes) for index in range(processes)]
        start_at = time.time() + 1.0  # every client process is up by then
        end_at = start_at + args.duration
        config = {
            "base_url": server.base_url, "auth_prefix": prefix, "tokens": tokens, "queues": QUEUES,
            "safe": safe, "lease": args.lease, "seed": args.seed, "journal_dir": str(journal_dir),
            "end_at": end_at, "start_at": start_at,
        }
        config_path = directory / "clients.json"
        clients = []
        for index in range(processes):
            client_config = {**config, "threads": counts[index], "first_token": sum(counts[:index])}
            if args.kill and index == 0:
                client_config["work"] = [0.2, 1.0]  # the consumer to kill: it holds leases while it works
            path = directory / f"client-{index}.json"
            path.write_text(json.dumps(client_config), encoding="utf-8")
            clients.append(children.start(f"client-{index}", [harness.PYTHON, str(harness.SCRIPTS_DIR / "client.py"),
                                                              str(path), str(index)], env.environ()))
        config_path.write_text(json.dumps({**config, "tokens": len(tokens)}), encoding="utf-8")
        producer = children.start(
            "task-producer",
            [harness.PYTHON, str(harness.SCRIPTS_DIR / "task_producer.py"), str(journal_dir / "tasks.jsonl"),
             str(args.task_rate), str(end_at)],
            env.environ(),
        )
        log(f"load: {args.clients} clients in {processes} processes for {args.duration:g} s"
            + (f", faults {env.faults}" if env.faults else "") + (", with kills" if args.kill else ""))

        schedule = [(0.50, "backup")]
        if args.kill:
            schedule = [(0.30, "gunicorn-worker"), (0.45, "task-worker"), (0.50, "backup"), (0.60, "client")]
        backup: dict[str, Any] = {}
        while time.time() < end_at:
            elapsed = (time.time() - start_at) / args.duration
            while schedule and elapsed >= schedule[0][0]:
                _, target = schedule.pop(0)
                if target == "backup":
                    backup = online_backup(env.store_path, directory / "backup.sqlite3")
                else:
                    kills.append(kill(target, server, task_workers, clients, children, env))
            if not server.child.alive():
                raise RunFailed(f"gunicorn died:\n{server.child.tail()}")
            time.sleep(0.05)

        log("load over; waiting for the clients")
        for child in clients + [producer]:
            try:
                child.process.wait(max(5.0, 4 * 30 + 20 - (time.time() - end_at)))
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: killed, and reported below
                child.kill()
        killed_clients = {event["pid"] for event in kills if event["target"] == "client"}
        bad_exits = [f"{child.name} exited with {child.process.returncode}" for child in clients + [producer]
                     if child.pid not in killed_clients and child.process.returncode != 0]
        checks.add("client processes ended cleanly", not bad_exits, "; ".join(bad_exits) or
                   f"{len(clients)} client processes and the task producer exited with 0"
                   + (f" (client pid {', '.join(map(str, killed_clients))} was killed on purpose)" if killed_clients else ""))

        journal = read_journals(journal_dir)
        killed_tasks = [event["running_task"] for event in kills if "running_task" in event]
        tasks = wait_for_tasks(journal["task_ids"] + killed_tasks, args.task_lease + 30.0)
        log("tasks done; checking the store")
        snapshot = take_snapshot(service, db)
        account(journal, snapshot, checks, safe, kills)
        drained = drain(service, db, args.lease + 15.0)
        log(f"drained in {drained['summary']['seconds']} s")
        final_checks(journal, snapshot, drained, kills, checks)
        task_checks(journal, tasks, killed_tasks, checks)

        log("stopping the task worker and gunicorn")
        codes = {child.name: child.stop() for child in task_workers if child.alive()}
        codes["gunicorn"] = server.child.stop(30.0)
        checks.add("servers stopped gracefully", all(code == 0 for code in codes.values()),
                   ", ".join(f"{name} exit {code}" for name, code in codes.items()))

    from django_fdbqueue import connection

    connection.reset_database()
    integrity = integrity_check(env.store_path)
    checks.add("SQLite integrity_check", integrity == "ok", f"PRAGMA integrity_check: {integrity}")
    if backup:
        backup_checks(backup, checks)
    faults = env.fault_counts()
    if env.faults:
        checks.add("faults were injected", sum(faults.get(kind, 0) for kind in env.faults) > 0,
                   f"injected (processes that exited cleanly): {faults}")

    duration = args.duration
    operations = {op: figures.summary(duration) for op, figures in journal["figures"].items()}
    total = OpFigures()
    for figures in journal["figures"].values():
        total.latencies_ms.extend(figures.latencies_ms)
        for status, count in figures.statuses.items():
            total.statuses[status] = total.statuses.get(status, 0) + count
    return {
        "config": {
            "duration_s": args.duration, "clients": args.clients, "client_processes": len(clients),
            "gunicorn_workers": args.workers, "gunicorn_threads": args.threads, "lease_s": args.lease,
            "task_rate": args.task_rate, "task_lease_s": args.task_lease, "faults": env.faults,
            "kill": args.kill, "safe_mode": safe, "queues": [queue["name"] for queue in QUEUES],
            "cpus": os.cpu_count(),
        },
        "operations": operations,
        "total": total.summary(duration),
        "accounting": journal["accounting"],
        "snapshot": snapshot["counts"],
        "drain": drained["summary"],
        "tasks": tasks["summary"],
        "faults_injected": faults,
        "kills": kills,
        "backup": {key: value for key, value in backup.items() if key != "path"},
        "checks": checks.items,
        "ok": checks.ok,
    }


def kill(target: str, server: harness.Server, task_workers: list[harness.Child], clients: list[harness.Child],
         children: Children, env: RunEnv) -> dict[str, Any]:
    """SIGKILL one process of ``target``'s kind; a killed task worker is replaced at once."""
    at = time.time()
    if target == "gunicorn-worker":
        pids = server.worker_pids()
        if not pids:
            raise RunFailed("no gunicorn worker to kill")
        pid = pids[0]
        os.kill(pid, signal.SIGKILL)
        # gunicorn's master starts a new worker in its place.
        harness.wait_until(lambda: pid not in server.worker_pids() and len(server.worker_pids()) >= server.workers,
                           30.0, "gunicorn to replace its killed worker")
        event = {"target": target, "pid": pid, "replaced_after_s": round(time.time() - at, 2)}
    elif target == "task-worker":
        # A task that sleeps, so the kill catches it RUNNING: it must come back after its lease.
        import reliability_tasks
        from django_fdbqueue.connection import get_database
        from django_fdbqueue.tasks import results

        held = reliability_tasks.hold.enqueue(3.0).id
        harness.wait_until(lambda: results.get(get_database(), held).status == "RUNNING", 20.0,
                           "the task worker to start the task it is killed in")
        victim = task_workers[-1]
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(10)
        task_workers.append(children.start("task-worker", harness.manage("fdbqueue", "worker", "--tasks", "--concurrency", "2"),
                                           env.environ()))
        event = {"target": target, "pid": victim.pid, "replaced_by": task_workers[-1].pid, "running_task": held}
    else:
        victim = clients[0]
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(10)
        event = {"target": target, "pid": victim.pid}
    event["t"] = round(at, 4)
    log(f"killed {target} (pid {event['pid']})")
    return event


# -- journals -----------------------------------------------------------------------------------


def read_lines(path: Path) -> list[dict[str, Any]]:
    """A journal's events; a last line cut by a SIGKILL is dropped."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def read_journals(journal_dir: Path) -> dict[str, Any]:
    """Everything the clients and the task producer said, folded per operation and per item."""
    figures: dict[str, OpFigures] = collections.defaultdict(OpFigures)
    intents: dict[str, str] = {}              # uid -> queue, every push attempted
    confirmed: dict[str, str] = {}            # uid -> item id of a push that answered 200/201
    in_doubt: set[str] = set()                # pushes whose answer never came
    consumed: list[tuple[str, str, str]] = []  # (uid, how, item id): pops and acks answered
    acked_ids: list[str] = []
    ack_doubt: set[str] = set()               # acks whose answer was lost: the item may be gone
    claims: dict[str, list[tuple[float, str, bool]]] = collections.defaultdict(list)  # uid -> (t, journal, abandon)
    settled_claims: dict[str, set[tuple[str, float]]] = collections.defaultdict(set)
    unexpected: collections.Counter[str] = collections.Counter()
    server_errors: list[dict[str, Any]] = []
    transport_errors: collections.Counter[str] = collections.Counter()
    transport_error_times: list[float] = []
    timeline: dict[str, list[Take]] = collections.defaultdict(list)  # uid -> takes, releases, acks
    duplicates_answered = 0
    task_ids: list[str] = []
    enqueue_errors: list[str] = []

    for path in sorted(journal_dir.glob("journal-*.jsonl")):
        source = path.stem.removeprefix("journal-")
        pending_push: set[str] = set()
        pending_ack: str | None = None
        last_claim: dict[str, float] = {}
        for seq, event in enumerate(read_lines(path)):
            op = event["op"]
            if op == "push?":
                intents[event["uid"]] = event["q"]
                pending_push.add(event["uid"])
                continue
            if op == "batch?":
                for uid in event["uids"]:
                    intents[uid] = event["q"]
                    pending_push.add(uid)
                continue
            if op == "ack?":
                pending_ack = event["uid"]
                continue
            if op == "release?":
                # From the moment it is sent, the item may be free again, answered or not.
                timeline[event["uid"]].append(Take(event["t"], 0.0, 0.0, source, "release", seq, sent=event["t"]))
                continue
            status = event["st"]
            figures[op].add(status, event.get("ms"))
            if status == "err":
                transport_errors[f"{op}: {event.get('err')}"] += 1
                transport_error_times.append(event["t"])
            elif status >= 500:
                server_errors.append(event)
            elif status not in EXPECTED[op]:
                unexpected[f"{op} {status}"] += 1
            if op == "push" and status in (200, 201):
                confirmed[event["uid"]] = event["id"]
                pending_push.discard(event["uid"])
                duplicates_answered += bool(event.get("dup"))
            elif op == "push" and status != "err":
                pending_push.discard(event["uid"])  # refused: nothing stored
            elif op == "batch":
                if status == 201:
                    for uid, item_id in zip(event["uids"], event["ids"]):
                        confirmed[uid] = item_id
                if status != "err":
                    pending_push.difference_update(event["uids"])
            elif op == "pop" and status == 200:
                consumed.append((event["uid"], "pop", event["id"]))
                timeline[event["uid"]].append(Take(event["t"], event["ms"] / 1000, 0.0, source, "pop", seq,
                                                   sent=event.get("t0")))
            elif op == "claim" and status == 200:
                claims[event["uid"]].append((event["t"], source, bool(event.get("abandon"))))
                last_claim[event["uid"]] = event["t"]
                timeline[event["uid"]].append(Take(event["t"], event["ms"] / 1000, event["lease"], source, "claim",
                                                   seq, sent=event.get("t0"), until=event.get("until")))
            elif op == "ack":
                uid = event["uid"]
                if status == 204:
                    consumed.append((uid, "ack", event["id"]))
                    acked_ids.append(event["id"])
                    pending_ack = None
                    timeline[uid].append(Take(event["t"], event["ms"] / 1000, 0.0, source, "ack", seq,
                                              sent=event.get("t0")))
                elif status == 409 and event.get("doubt"):
                    ack_doubt.add(uid)
                    pending_ack = None
                elif status != "err":
                    pending_ack = None
                if status != "err" and uid in last_claim:
                    settled_claims[uid].add((source, last_claim[uid]))
            elif op == "release" and status != "err" and event["uid"] in last_claim:
                settled_claims[event["uid"]].add((source, last_claim[event["uid"]]))
        if pending_ack is not None:  # the journal ends between an ack and its answer: killed
            ack_doubt.add(pending_ack)
        in_doubt.update(pending_push)

    tasks_path = journal_dir / "tasks.jsonl"
    task_events = read_lines(tasks_path) if tasks_path.exists() else []
    for event in task_events:
        figures["enqueue task"].add(200 if "id" in event else "error", event.get("ms"))
        if "id" in event:
            task_ids.append(event["id"])
        else:
            enqueue_errors.append(event["error"])

    return {
        "figures": dict(figures), "intents": intents, "confirmed": confirmed, "in_doubt": in_doubt - set(confirmed),
        "consumed": consumed, "acked_ids": acked_ids, "ack_doubt": ack_doubt, "claims": claims,
        "settled_claims": settled_claims, "timeline": timeline, "unexpected": unexpected, "server_errors": server_errors,
        "transport_errors": transport_errors, "transport_error_times": transport_error_times,
        "duplicates_answered": duplicates_answered,
        "task_ids": task_ids, "enqueue_errors": enqueue_errors, "accounting": {},
    }


# -- the store ----------------------------------------------------------------------------------


def pages(listing: Any, db: Any, name: str, **options: Any) -> list[Any]:
    """Every entry of a paged listing."""
    entries, cursor = [], None
    while True:
        page = listing(db, name, cursor=cursor, limit=1000, **options)
        entries.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return entries


def take_snapshot(service: Any, db: Any) -> dict[str, Any]:
    """Every load queue's counters and contents, once the clients have stopped."""
    present: list[tuple[str, str, str]] = []  # (uid, where, queue)
    counts: dict[str, dict[str, int]] = {}
    listed: dict[str, dict[str, int]] = {}
    for queue in QUEUES:
        name = queue["name"]
        info = service.get_queue(db, name)
        counts[name] = {"pushed": info.pushed, "popped": info.popped, "ready": info.size, "leased": info.leased,
                        "delayed": info.delayed, "dead": info.dead}
        ready = pages(service.browse, db, name)
        scheduled = pages(service.scheduled, db, name)
        dead = pages(service.dead_letters, db, name)
        listed[name] = {
            "ready": len(ready),
            "leased": sum(entry.state == "leased" for entry in scheduled),
            "delayed": sum(entry.state == "delayed" for entry in scheduled),
            "dead": len(dead),
        }
        present += [(item.value["uid"], "ready", name) for item in ready]
        present += [(entry.item.value["uid"], entry.state, name) for entry in scheduled]
        present += [(entry.item.value["uid"], "dead", name) for entry in dead]
    return {"present": present, "counts": counts, "listed": listed}


def drain(service: Any, db: Any, seconds: float) -> dict[str, Any]:
    """Claim and ack everything left, waiting for leases and delays to end; delete dead letters."""
    taken: list[tuple[str, int]] = []  # (uid, attempts)
    takes: list[tuple[str, Take]] = []
    dead: list[str] = []
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    while True:
        for queue in QUEUES:
            while True:
                asked_at = time.time()
                lease = service.claim(db, queue["name"], lease=60)
                if lease is None:
                    break
                answered_at = time.time()
                taken.append((lease.item.value["uid"], lease.item.attempts))
                take = Take(answered_at, answered_at - asked_at, 60.0, "drain", "drain", sent=asked_at,
                            until=lease.lease_expires_at.timestamp())
                takes.append((lease.item.value["uid"], take))
                service.ack(db, lease.receipt)
        infos = [service.get_queue(db, queue["name"]) for queue in QUEUES]
        if all(info.size == 0 and info.leased == 0 and info.delayed == 0 for info in infos):
            break
        if time.monotonic() > deadline:
            left = {info.name: (info.size, info.leased, info.delayed) for info in infos}
            raise RunFailed(f"items did not come back within {seconds:g} s: {left}")
        time.sleep(0.2)
    for queue in QUEUES:
        for entry in pages(service.dead_letters, db, queue["name"]):
            service.delete_dead_letter(db, queue["name"], entry.item.id)
            dead.append(entry.item.value["uid"])
    left = {queue["name"]: service.get_queue(db, queue["name"]) for queue in QUEUES}
    empty = all(info.size == info.leased == info.delayed == info.dead == 0 for info in left.values())
    return {
        "taken": taken, "takes": takes, "dead": dead, "empty": empty,
        "summary": {"claimed_and_acked": len(taken), "dead_letters_deleted": len(dead),
                    "seconds": round(time.monotonic() - started, 2), "store_empty_after": empty},
    }


def online_backup(store: Path, target: Path) -> dict[str, Any]:
    """Copy the store while the run writes to it, with SQLite's online backup API.

    The same as ``sqlite3 fdbqueue.sqlite3 ".backup target"``: one read snapshot, so the copy is
    the store as of one commit, whatever the writers do meanwhile.
    """
    started = time.monotonic()
    source = sqlite3.connect(str(store), timeout=30)
    copy = sqlite3.connect(str(target))
    try:
        source.backup(copy)
    finally:
        copy.close()
        source.close()
    seconds = time.monotonic() - started
    log(f"online backup taken in {seconds:.2f} s")
    return {"path": target, "seconds": round(seconds, 3), "bytes": target.stat().st_size}


def backup_checks(backup: dict[str, Any], checks: Checks) -> None:
    """The mid-run copy is sound and self-consistent: it opens, and its counters match its items."""
    from django_fdbqueue import service
    from django_fdbqueue.engines.embedded import EmbeddedDatabase

    integrity = integrity_check(backup["path"])
    database = EmbeddedDatabase(str(backup["path"]))
    try:
        snapshot = take_snapshot(service, database)
    finally:
        database.close()
    problems = []
    for name, counts in snapshot["counts"].items():
        queued = counts["ready"] + counts["leased"] + counts["delayed"] + counts["dead"]
        if counts["pushed"] - counts["popped"] != queued:
            problems.append(f"{name}: pushed - popped != queued")
        problems += [f"{name}: {key} counted {counts[key]}, listed {snapshot['listed'][name][key]}"
                     for key in ("ready", "leased", "delayed", "dead") if counts[key] != snapshot["listed"][name][key]]
    backup["items"] = len(snapshot["present"])
    backup["pushed_so_far"] = sum(counts["pushed"] for counts in snapshot["counts"].values())
    checks.add("an online backup taken mid-run is consistent", integrity == "ok" and not problems,
               f"integrity_check {integrity}; {backup['items']} items queued in it, counters "
               + ("agree with its contents" if not problems else f"disagree: {problems[:3]}")
               + f"; copied {backup['bytes']:,} bytes in {backup['seconds']} s while the run wrote")


def integrity_check(path: Path) -> str:
    """SQLite's own verdict on the store file (``ok`` when sound)."""
    conn = sqlite3.connect(str(path), timeout=30)
    try:
        return "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check").fetchall())
    finally:
        conn.close()


# -- the checks ---------------------------------------------------------------------------------


def account(journal: dict[str, Any], snapshot: dict[str, Any], checks: Checks, safe: bool,
            kills: list[dict[str, Any]]) -> None:
    """The checks on the snapshot: nothing lost, nothing twice, counters agree, no 5xx."""
    confirmed, in_doubt, intents = journal["confirmed"], journal["in_doubt"], journal["intents"]
    consumed_uids = collections.Counter(uid for uid, _, _ in journal["consumed"])
    present_uids = collections.Counter(uid for uid, _, _ in snapshot["present"])
    ack_doubt = journal["ack_doubt"]

    checks.add("no 5xx response", not journal["server_errors"],
               f"{len(journal['server_errors'])} responses >= 500"
               + (f", first: {journal['server_errors'][0]}" if journal["server_errors"] else ""))
    checks.add("only documented statuses", not journal["unexpected"],
               ", ".join(f"{key}: {count}" for key, count in journal["unexpected"].items()) or "none other")
    transport = sum(journal["transport_errors"].values())
    # A killed gunicorn worker drops the requests it was serving: those fail at once, and only those.
    server_kills = [event["t"] for event in kills if event["target"] == "gunicorn-worker"]
    stray = [t for t in journal["transport_error_times"]
             if not any(kill_t <= t <= kill_t + TRANSPORT_ERROR_WINDOW for kill_t in server_kills)]
    checks.add("no transport errors" if not server_kills else "transport errors only where a server worker was killed",
               not stray,
               (", ".join(f"{key}: {count}" for key, count in journal["transport_errors"].items()) or "none")
               + (f"; {len(stray)} not within {TRANSPORT_ERROR_WINDOW:g} s of a kill" if stray else ""))

    twice = {uid: count for uid, count in consumed_uids.items() if count > 1}
    acked_twice = [item_id for item_id, count in collections.Counter(journal["acked_ids"]).items() if count > 1]
    checks.add("no item popped or acked twice", not twice and not acked_twice,
               f"{len(twice)} uids consumed more than once {list(twice.items())[:5]}, {len(acked_twice)} ids acked twice"
               if twice or acked_twice else f"{len(consumed_uids)} items consumed, each once")
    stored_twice = [uid for uid, count in present_uids.items() if count > 1]
    both = sorted(set(consumed_uids) & set(present_uids))
    checks.add("no duplicate stored", not stored_twice and not both,
               f"{len(stored_twice)} uids stored twice {stored_twice[:5]}, {len(both)} consumed yet still queued {both[:5]}"
               if stored_twice or both else "every queued item is there once, and none of them was consumed")
    lost = sorted(uid for uid in confirmed if uid not in consumed_uids and uid not in present_uids and uid not in ack_doubt)
    checks.add("every confirmed push consumed or still queued", not lost,
               f"{len(lost)} lost: {lost[:10]}" if lost else f"{len(confirmed)} confirmed pushes, none lost")
    strays = sorted(uid for uid in set(consumed_uids) | set(present_uids) if uid not in intents)
    checks.add("nothing from nowhere", not strays, f"{len(strays)} unknown uids {strays[:5]}" if strays else "every item was pushed by a client")

    found_in_doubt = {uid for uid in in_doubt if uid in consumed_uids or uid in present_uids}
    gone_by_doubtful_ack = {uid for uid in ack_doubt if uid not in consumed_uids and uid not in present_uids}
    queued = len(present_uids)
    left = len(consumed_uids) + queued + len(gone_by_doubtful_ack)
    right = len(confirmed) + len(found_in_doubt)
    states = collections.Counter(where for _, where, _ in snapshot["present"])
    checks.add("consumed + still queued == pushed", left == right,
               f"popped/acked {len(consumed_uids)} + queued {queued} (ready {states['ready']}, leased {states['leased']}, "
               f"delayed {states['delayed']}, dead {states['dead']}) + gone by an ack in doubt {len(gone_by_doubtful_ack)}"
               f" = {left}; pushed {len(confirmed)} confirmed + {len(found_in_doubt)} of {len(in_doubt)} in doubt = {right}")

    counter_problems = []
    total_pushed = 0
    for name, counts in snapshot["counts"].items():
        total_pushed += counts["pushed"]
        queued_counted = counts["ready"] + counts["leased"] + counts["delayed"] + counts["dead"]
        if counts["pushed"] - counts["popped"] != queued_counted:
            counter_problems.append(f"{name}: pushed {counts['pushed']} - popped {counts['popped']} != queued {queued_counted}")
        listed = snapshot["listed"][name]
        for key in ("ready", "leased", "delayed", "dead"):
            if listed[key] != counts[key]:
                counter_problems.append(f"{name}: counter {key} {counts[key]} but {listed[key]} listed")
    if not len(confirmed) + len(found_in_doubt) <= total_pushed <= len(confirmed) + len(in_doubt):
        counter_problems.append(f"pushed counters {total_pushed} outside [{len(confirmed) + len(found_in_doubt)}, "
                                f"{len(confirmed) + len(in_doubt)}]")
    checks.add("queue counters agree with contents", not counter_problems,
               "; ".join(counter_problems) or f"pushed {total_pushed} = popped/acked + ready + leased + delayed + dead, per queue")

    journal["accounting"] = {
        "pushes_confirmed": len(confirmed),
        "pushes_answered_duplicate": journal["duplicates_answered"],
        "pushes_in_doubt": len(in_doubt),
        "pushes_in_doubt_found": len(found_in_doubt),
        "consumed": len(consumed_uids),
        "consumed_by_pop": sum(how == "pop" for _, how, _ in journal["consumed"]),
        "consumed_by_ack": sum(how == "ack" for _, how, _ in journal["consumed"]),
        "acks_in_doubt": len(ack_doubt),
        "queued_at_end": dict(states),
        "claims": sum(len(events) for events in journal["claims"].values()),
        "items_claimed_more_than_once": sum(len(events) > 1 for events in journal["claims"].values()),
        "transport_errors": transport,
        "safe_mode": safe,
    }


def final_checks(journal: dict[str, Any], snapshot: dict[str, Any], drained: dict[str, Any],
                 kills: list[dict[str, Any]], checks: Checks) -> None:
    """After the drain: leases came back, and every item was consumed exactly once overall."""
    claims, settled = journal["claims"], journal["settled_claims"]
    drained_uids = collections.Counter(uid for uid, _ in drained["taken"]) + collections.Counter(drained["dead"])
    consumed = collections.Counter(uid for uid, _, _ in journal["consumed"])
    killed_client = next((event for event in kills if event["target"] == "client"), None)

    # Leases nobody settled: abandoned on purpose, or held by the killed client process.
    outstanding: list[tuple[str, float, str]] = []
    for uid, events in claims.items():
        for t, source, abandon in events:
            if abandon or (killed_client and source.startswith("p0t") and (source, t) not in settled[uid]):
                outstanding.append((uid, t, "abandoned" if abandon else "killed consumer"))
    back_in_run = back_in_drain = dead = 0
    missing = []
    dead_uids = set(drained["dead"])
    for uid, t, why in outstanding:
        later = [when for when, _, _ in claims[uid] if when > t]
        popped_later = any(u == uid and how == "pop" for u, how, _ in journal["consumed"])
        if later or popped_later:
            back_in_run += 1
        elif uid in drained_uids and uid not in dead_uids:
            back_in_drain += 1
        elif uid in dead_uids:
            dead += 1
        elif uid in journal["ack_doubt"] and why == "killed consumer":
            continue  # the killed process may have acked it in its last moment
        else:
            missing.append((uid, why))
    kinds = collections.Counter(why for _, _, why in outstanding)
    if killed_client:
        checks.add("the killed consumer held leases", kinds["killed consumer"] > 0,
                   f"{kinds['killed consumer']} leases held by the killed consumer were never settled by it")
    checks.add("leased items come back", not missing,
               f"{len(outstanding)} leases never settled ({dict(kinds)}): {back_in_run} claimed again during the run, "
               f"{back_in_drain} after it, {dead} became dead letters (max_attempts)"
               + (f"; {len(missing)} never came back: {missing[:5]}" if missing else ""))

    timeline = {uid: list(events) for uid, events in journal["timeline"].items()}
    for uid, take in drained["takes"]:
        timeline.setdefault(uid, []).append(take)
    overlaps = overlapping_deliveries(timeline)
    redelivered = sum(sum(event.kind in ("claim", "drain", "pop") for event in events) > 1 for events in timeline.values())
    checks.add("a second delivery only after the lease ended", not overlaps,
               f"{len(overlaps)} items delivered while leased: {overlaps[:3]}" if overlaps else
               f"{redelivered} items delivered more than once, each time after the previous lease ended or was released")

    overall = consumed + drained_uids
    wrong = {uid: overall.get(uid, 0) for uid in journal["confirmed"]
             if overall.get(uid, 0) != 1 and not (uid in journal["ack_doubt"] and overall.get(uid, 0) == 0)}
    extra = {uid: count for uid, count in overall.items() if count > 1}
    checks.add("after the drain, every item consumed exactly once", not wrong and not extra and drained["empty"],
               f"{sum(overall.values())} consumptions of {len(overall)} items; store empty: {drained['empty']}"
               + (f"; wrong counts {list(wrong.items())[:5]}" if wrong else "") + (f"; twice {list(extra.items())[:5]}" if extra else ""))


def wait_for_tasks(task_ids: list[str], seconds: float) -> dict[str, Any]:
    """Wait (bounded) until every enqueued task has finished; their statuses and timings."""
    from django_fdbqueue.connection import get_database
    from django_fdbqueue.tasks import results

    db = get_database()
    deadline = time.monotonic() + seconds
    records: dict[str, Any] = {}
    while True:
        records = {task_id: results.get(db, task_id) for task_id in task_ids}
        unfinished = [task_id for task_id, record in records.items() if record is None or not record.finished]
        if not unfinished or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    statuses = collections.Counter("MISSING" if record is None else record.status for record in records.values())
    lags = [(record.finished_us - record.enqueued_us) / 1000 for record in records.values()
            if record is not None and record.finished and getattr(record, "finished_us", None)]
    attempts = collections.Counter(len(record.worker_ids) for record in records.values() if record is not None)
    return {
        "records": records,
        "summary": {
            "enqueued": len(task_ids), "statuses": dict(statuses),
            "attempts": {str(key): value for key, value in sorted(attempts.items())},
            "enqueue_to_finish_p50_ms": _round(harness.percentile(lags, 0.5)),
            "enqueue_to_finish_p99_ms": _round(harness.percentile(lags, 0.99)),
        },
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def task_checks(journal: dict[str, Any], tasks: dict[str, Any], killed_tasks: list[str], checks: Checks) -> None:
    """Tasks ran (or wait to), none failed; a task caught by a worker's kill ran again to success."""
    if killed_tasks:
        records = [tasks["records"].get(task_id) for task_id in killed_tasks]
        came_back = [record is not None and record.status == "SUCCESSFUL" and len(record.worker_ids) >= 2
                     for record in records]
        checks.add("a task running in the killed task worker ran again", all(came_back),
                   "; ".join(f"{record.status if record else 'MISSING'} after "
                             f"{len(record.worker_ids) if record else 0} attempts" for record in records))
    statuses = tasks["summary"]["statuses"]
    bad = {status: count for status, count in statuses.items() if status not in ("SUCCESSFUL", "READY", "RUNNING")}
    checks.add("every task SUCCESSFUL or still pending", not bad and tasks["summary"]["enqueued"] > 0,
               f"{tasks['summary']['enqueued']} tasks: {statuses}")
    checks.add("every task enqueue succeeded", not journal["enqueue_errors"],
               f"{len(journal['enqueue_errors'])} failed: {journal['enqueue_errors'][:3]}" if journal["enqueue_errors"]
               else "all answered with a result id")


# -- the report ---------------------------------------------------------------------------------


def render(report: dict[str, Any]) -> str:
    """The report as text: the per-operation table, the accounting, the checks."""
    config = report["config"]
    lines = [
        f"Load run: {config['clients']} clients in {config['client_processes']} processes, {config['duration_s']:g} s, "
        f"gunicorn {config['gunicorn_workers']} workers x {config['gunicorn_threads']} threads, embedded engine, "
        f"{config['cpus']} CPUs" + (f", faults {config['faults']}" if config["faults"] else "")
        + (", kills" if config["kill"] else ""),
        "",
    ]
    order = [op for op in OPERATION_ORDER if op in report["operations"]] + \
        [op for op in report["operations"] if op not in OPERATION_ORDER]
    rows = [(op, figures["requests"], figures["requests_per_s"], figures["p50_ms"], figures["p99_ms"],
             " ".join(f"{status}:{count}" for status, count in figures["statuses"].items()))
            for op, figures in ((op, report["operations"][op]) for op in order)]
    total = report["total"]
    rows.append(("all", total["requests"], total["requests_per_s"], total["p50_ms"], total["p99_ms"], ""))
    lines.append(harness.table(rows, ("operation", "requests", "req/s", "p50 ms", "p99 ms", "statuses")))
    lines += ["", "Accounting: " + json.dumps(report["accounting"]), "Queues at the end: " + json.dumps(report["snapshot"]),
              "Drain: " + json.dumps(report["drain"]), "Tasks: " + json.dumps(report["tasks"])]
    if any(report["faults_injected"].values()):
        lines.append("Faults injected: " + json.dumps(report["faults_injected"]))
    for event in report["kills"]:
        lines.append("Killed: " + json.dumps(event))
    if report.get("backup"):
        lines.append("Online backup mid-run: " + json.dumps(report["backup"]))
    lines.append("")
    lines += harness.verdicts(report)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, parse_args, run, render)


if __name__ == "__main__":
    sys.exit(main())
