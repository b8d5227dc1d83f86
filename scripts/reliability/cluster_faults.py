"""Kill -9 one fdbserver of a three-process FoundationDB cluster under load; check nothing was lost.

    .venv/bin/python scripts/reliability/cluster_faults.py                        # 40 s, kill at 12 s
    .venv/bin/python scripts/reliability/cluster_faults.py --duration 20 --kill-at 6 --json   # CI size
    .venv/bin/python scripts/reliability/cluster_faults.py --cluster-file PATH    # a cluster of scripts/fdb-cluster

FoundationDB's binaries are found as ``scripts/fdb-cluster`` finds them (``FDB_HOME``, then the
packages' places). What one run does, in a fresh temp directory:

1. Starts a cluster of three ``fdbserver`` processes on loopback (``double`` redundancy, one zone
   each), unless ``--cluster-file`` names one that ``scripts/fdb-cluster start --processes 3``
   started. Every process of the run uses it through the service with ``FDBQUEUE['TIMEOUT']``.
2. Starts pusher processes (every push has a ``dedup_key``, and a push that fails is retried
   with the same key until it is acknowledged), claimer processes (``claim(wait=...)`` then
   ``ack``, more claims than the pushes can feed, so they spend their time in blocking claims
   with watches, as in the report of issue 18), a task worker and a task producer. Each
   pusher and claimer journals every call, flushed as it goes.
3. SIGKILLs one fdbserver at ``--kill-at`` seconds, and probes the cluster with a small
   transaction every 0.1 s to time its recovery (the first commit that succeeds after the kill).
4. At the end, stops the clients, waits for the tasks, drains the queue (claim and ack), and
   brings the killed process back when the cluster was not started by this run.

The checks (exit code 1 when one fails): every acknowledged push was delivered (claimed and
acked, or drained); each dedup key stored one item; no item was held by two consumers at once (a
second claim answered before the first lease could end); every client made progress within a
bounded time after the cluster recovered, and was still making progress at the end (a client
blocked for good is the defect of issue 18: its stack is dumped into the report); every task ran;
the queue's counters balance after the drain.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import Children, RunEnv, RunFailed, log  # noqa: E402

QUEUE = "faults.jobs"
SETTINGS_MODULE = "cluster_settings"
# The role of a client process; the driver starts them as ``cluster_faults.py child ROLE CONFIG``.
ROLES = ("pusher", "claimer")
# A retried push or ack waits this long first, so a client does not spin while the cluster recovers.
RETRY_PAUSE = 0.05
# A client that answered nothing for this long at the end of the run counts as blocked.
STUCK_SECONDS = 10.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=40.0, help="Seconds of load (default 40).")
    parser.add_argument("--kill-at", type=float, default=12.0, help="Seconds into the load of the kill (default 12).")
    parser.add_argument(
        "--kill-index", type=int, choices=(0, 1, 2), default=0, help="Which fdbserver process to kill (default 0)."
    )
    parser.add_argument("--pushers", type=int, default=2, help="Pusher processes (default 2).")
    parser.add_argument("--claimers", type=int, default=3, help="Claimer processes (default 3).")
    parser.add_argument(
        "--push-rate",
        type=float,
        default=20.0,
        help="Pushes per second per pusher (default 20, fewer than the claimers can take; 0: as fast as they go).",
    )
    parser.add_argument("--wait", type=float, default=1.0, help="Claims' wait= seconds (default 1, as in issue 18).")
    parser.add_argument("--lease", type=float, default=10.0, help="Claims' lease in seconds (default 10).")
    parser.add_argument("--timeout", type=float, default=5.0, help="FDBQUEUE['TIMEOUT'] in seconds (default 5).")
    parser.add_argument("--task-rate", type=float, default=5.0, help="Tasks enqueued per second (default 5).")
    parser.add_argument(
        "--storage",
        choices=("memory", "ssd-2"),
        default="memory",
        help="The cluster's storage engine, when this run starts it (default memory).",
    )
    parser.add_argument("--cluster-file", help="A three-process cluster started by scripts/fdb-cluster.")
    parser.add_argument("--json", action="store_true", help="Print the report as one JSON document.")
    parser.add_argument("--keep", action="store_true", help="Keep the run's directory (journals, logs).")
    args = parser.parse_args(argv)
    if args.duration <= 0 or not 0 < args.kill_at < args.duration:
        parser.error("--kill-at must fall inside --duration")
    if args.pushers < 1 or args.claimers < 1 or args.timeout <= 0 or args.lease <= 0 or args.wait < 0:
        parser.error("--pushers, --claimers, --timeout and --lease must be positive, --wait not negative")
    return args


# -- the cluster -------------------------------------------------------------------------------


@contextlib.contextmanager
def cluster_for(args: argparse.Namespace) -> Iterator[Any]:
    """The run's cluster: started and stopped here, or the one ``--cluster-file`` names (left as found)."""
    from django_fdbqueue.testing.binaries import BinariesNotFound
    from django_fdbqueue.testing.cluster import ClusterError, LocalCluster

    try:
        if args.cluster_file:
            cluster = LocalCluster.load(args.cluster_file)
            if cluster.processes != 3:
                raise RunFailed(f"{args.cluster_file} is a cluster of {cluster.processes} process(es), not 3")
            try:
                yield cluster
            finally:
                cluster.start_processes()
            return
        log(f"starting a three-process cluster ({args.storage})")
        cluster = LocalCluster(processes=3, storage=args.storage).start()
    except (BinariesNotFound, ClusterError) as error:
        raise RunFailed(str(error)) from None
    try:
        yield cluster
    finally:
        cluster.stop()


def client_library() -> str | None:
    from django_fdbqueue.testing import binaries

    with contextlib.suppress(binaries.BinariesNotFound):
        return binaries.find(need_library=True).library
    return None


def write_settings(directory: Path, fdbqueue: dict[str, Any]) -> None:
    """The settings module every process of the run reads: the demo's run settings, on the cluster."""
    (directory / f"{SETTINGS_MODULE}.py").write_text(
        "from demo.settings_load import *  # noqa: F401,F403\n"
        "from demo.settings_load import FDBQUEUE as _RUN_FDBQUEUE\n\n"
        "FDBQUEUE = {key: value for key, value in _RUN_FDBQUEUE.items() if key not in ('PATH', 'FAULTS')}\n"
        f"FDBQUEUE.update({fdbqueue!r})\n",
        encoding="utf-8",
    )


def run_environ(run: RunEnv) -> dict[str, str]:
    env = run.environ(faults=False)
    env["DJANGO_SETTINGS_MODULE"] = SETTINGS_MODULE
    env["PYTHONPATH"] = os.pathsep.join([str(run.directory), env["PYTHONPATH"]])
    return env


def setup_django(env: dict[str, str]) -> None:
    """Django in the driver, on the run's settings (the client library loads from CLIENT_LIBRARY)."""
    os.environ.update(env)
    for path in reversed(env["PYTHONPATH"].split(os.pathsep)):
        if path and path not in sys.path:
            sys.path.insert(0, path)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


# -- the probe: when does the cluster commit again? ---------------------------------------------


class Probe:
    """A thread committing one atomic add every 0.1 s: the first success after the kill is recovery."""

    def __init__(self, db: Any) -> None:
        from django_fdbqueue.fdbapi import fdb

        self.db = db
        self.key = fdb.Subspace(("fdbqueue-cluster-faults-probe", uuid.uuid4().hex)).pack(("n",))
        self.results: list[tuple[float, float, bool]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="probe", daemon=True)

    def __enter__(self) -> "Probe":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(60)
        with contextlib.suppress(Exception):
            del self.db[self.key]

    def _main(self) -> None:
        from django_fdbqueue.fdbapi import FDBError, transactional

        @transactional
        def touch(tr: Any) -> None:
            tr.add(self.key, (1).to_bytes(8, "little"))

        while not self._stop.is_set():
            started = time.time()
            try:
                touch(self.db)
                ok = True
            except FDBError:
                ok = False
            self.results.append((started, time.time(), ok))
            self._stop.wait(0.1)

    def recovered_at(self, killed_at: float) -> float | None:
        """When the first commit begun after the kill succeeded (None: never)."""
        return next((ended for started, ended, ok in self.results if ok and started >= killed_at), None)

    def longest_failure(self) -> float:
        """The longest stretch without a successful commit, in seconds."""
        longest, last_ok = 0.0, None
        for _started, ended, ok in self.results:
            if ok:
                if last_ok is not None:
                    longest = max(longest, ended - last_ok)
                last_ok = ended
        return longest


# -- client processes ------------------------------------------------------------------------------


class Journal:
    """One client's journal: a JSON line per call, flushed at once (a stuck client still said it all)."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "a", buffering=1, encoding="utf-8")

    def write(self, **event: Any) -> None:
        event["t"] = round(time.time(), 4)
        self._file.write(json.dumps(event, separators=(",", ":")) + "\n")


def child_main(role: str, config_path: str, index: int) -> int:
    """A pusher or claimer process: loops until the run's end or SIGTERM, journaling every call."""
    import faulthandler

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the driver asks for stacks of a stuck client
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    import django

    django.setup()
    from django_fdbqueue.connection import get_database

    db = get_database()
    journal = Journal(Path(config["journal_dir"]) / f"{role}-{index}.jsonl")
    if role == "pusher":
        push_loop(db, config, f"p{index}", journal, stop)
    else:
        claim_loop(db, config, journal, stop)
    return 0


def push_loop(db: Any, config: dict[str, Any], tag: str, journal: Journal, stop: threading.Event) -> None:
    """Push with a dedup key; retry a failed push with the same key until it is acknowledged."""
    from django_fdbqueue import service
    from django_fdbqueue.fdbapi import FDBError

    interval = 1.0 / config["push_rate"] if config["push_rate"] > 0 else 0.0
    number = 0
    while not stop.is_set() and time.time() < config["end_at"]:
        number += 1
        uid = f"{tag}-{number}"
        started = time.monotonic()
        while not stop.is_set():
            sent = time.time()
            try:
                item = service.push(db, QUEUE, {"uid": uid}, dedup_key=uid)
            except FDBError as error:
                journal.write(op="push", uid=uid, err=error.code, t0=sent)
                stop.wait(RETRY_PAUSE)
                continue
            journal.write(op="push", uid=uid, id=item.id, dup=item.duplicate, t0=sent)
            break
        if interval:
            stop.wait(max(0.0, interval - (time.monotonic() - started)))


def claim_loop(db: Any, config: dict[str, Any], journal: Journal, stop: threading.Event) -> None:
    """Claim with ``wait``, then ack (retrying an ack that failed: the service settles it safely)."""
    from django_fdbqueue import service
    from django_fdbqueue.exceptions import LeaseGone
    from django_fdbqueue.fdbapi import FDBError

    while not stop.is_set() and time.time() < config["end_at"]:
        sent = time.time()
        try:
            lease = service.claim(db, QUEUE, lease=config["lease"], wait=config["wait"])
        except FDBError as error:
            journal.write(op="claim", err=error.code, t0=sent)
            stop.wait(RETRY_PAUSE)
            continue
        if lease is None:
            journal.write(op="empty", t0=sent)
            continue
        uid = lease.item.value["uid"]
        journal.write(op="claim", uid=uid, id=lease.item.id, t0=sent, until=lease.lease_expires_at.timestamp())
        while True:
            sent = time.time()
            try:
                service.ack(db, lease.receipt)
            except FDBError as error:
                journal.write(op="ack", uid=uid, id=lease.item.id, err=error.code, t0=sent)
                if stop.wait(RETRY_PAUSE):
                    break
                continue
            except LeaseGone as error:  # its lease ended first: the item is someone else's now
                journal.write(op="ack", uid=uid, id=lease.item.id, err=error.code, t0=sent)
                break
            journal.write(op="ack", uid=uid, id=lease.item.id, t0=sent)
            break


# -- the run -------------------------------------------------------------------------------------


def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    """Do the whole run in ``directory``; the report (figures and checks)."""
    library = client_library()
    if library is None:
        raise RunFailed("FoundationDB's client library (libfdb_c) was not found: set FDB_HOME")
    journal_dir = directory / "journals"
    journal_dir.mkdir()
    with cluster_for(args) as cluster:
        fdbqueue = {
            "ENGINE": "foundationdb",
            "CLUSTER_FILE": cluster.cluster_file,
            "CLIENT_LIBRARY": library,
            "ROOT": ("fdbqueue-cluster-faults", uuid.uuid4().hex),
            "TIMEOUT": args.timeout,
        }
        write_settings(directory, fdbqueue)
        env = run_environ(RunEnv(directory, task_lease=max(3.0, 2 * args.timeout)))
        setup_django(env)
        from django_fdbqueue import service
        from django_fdbqueue.connection import get_database

        db = get_database()
        service.create_queue(db, QUEUE)
        with Children(directory) as children:
            with Probe(db) as probe:
                report = load_and_kill(args, cluster, children, probe, env, journal_dir)
            report["drain"] = drain(db, args.lease + 2 * args.timeout + 10)
        clear_root(db)
    report["config"] = {
        "duration_s": args.duration,
        "kill_at_s": args.kill_at,
        "kill_index": args.kill_index,
        "pushers": args.pushers,
        "claimers": args.claimers,
        "push_rate": args.push_rate,
        "wait_s": args.wait,
        "lease_s": args.lease,
        "timeout_s": args.timeout,
        "storage": args.storage if not args.cluster_file else "given",
        "cpus": os.cpu_count(),
    }
    checks = harness_checks(report, args)
    report["checks"] = checks
    report["ok"] = all(check["ok"] for check in checks)
    return report


def start_clients(
    args: argparse.Namespace, children: Children, env: dict[str, str], journal_dir: Path, end_at: float
) -> dict[str, list[harness.Child]]:
    config = {
        "journal_dir": str(journal_dir),
        "end_at": end_at,
        "push_rate": args.push_rate,
        "lease": args.lease,
        "wait": args.wait,
    }
    config_path = journal_dir.parent / "clients.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    script = str(Path(__file__).resolve())
    started: dict[str, list[harness.Child]] = {"pusher": [], "claimer": []}
    for role, count in (("pusher", args.pushers), ("claimer", args.claimers)):
        for index in range(count):
            command = [harness.PYTHON, script, "child", role, str(config_path), str(index)]
            started[role].append(children.start(f"{role}-{index}", command, env))
    started["task-worker"] = [
        children.start("task-worker", harness.manage("fdbqueue", "worker", "--tasks", "--concurrency", "2"), env)
    ]
    started["task-producer"] = [
        children.start(
            "task-producer",
            [
                harness.PYTHON,
                str(harness.SCRIPTS_DIR / "task_producer.py"),
                str(journal_dir / "tasks.jsonl"),
                str(args.task_rate),
                str(end_at),
            ],
            env,
        )
    ]
    return started


def load_and_kill(
    args: argparse.Namespace, cluster: Any, children: Children, probe: Probe, env: dict[str, str], journal_dir: Path
) -> dict[str, Any]:
    """Clients run, one fdbserver dies at ``--kill-at``; what the journals and the probe say."""
    warm_up = 60.0
    # Only a bound: the driver stops the clients (SIGTERM) when the load's time is up.
    end_at = time.time() + warm_up + args.duration
    clients = start_clients(args, children, env, journal_dir, end_at)
    harness.wait_until(lambda: all_answered(journal_dir, args, clients), warm_up, "every client's first answer")
    load_from = time.time()
    log(f"clients running; killing fdbserver {args.kill_index} in {args.kill_at:g} s")
    time.sleep(args.kill_at)
    killed_at = time.time()
    cluster.kill(args.kill_index)
    log(f"fdbserver {args.kill_index} killed")
    end = load_from + args.duration
    while time.time() < end:
        time.sleep(0.2)
    stacks = dump_stuck(journal_dir, clients)
    stop_clients(clients)
    tasks = tasks_of(journal_dir, args)
    for child in clients["task-worker"]:
        child.stop(grace=30.0)
    return {
        "tasks": tasks,
        "killed_at": killed_at,
        "load_from": load_from,
        "end": time.time(),
        "recovered_at": probe.recovered_at(killed_at),
        "probe_longest_failure_s": round(probe.longest_failure(), 2),
        "stacks": stacks,
        "journals": read_journals(journal_dir),
    }


def all_answered(journal_dir: Path, args: argparse.Namespace, clients: dict[str, list[harness.Child]]) -> bool:
    for child in (child for group in clients.values() for child in group):
        if not child.alive():
            raise RunFailed(f"{child.name} exited with {child.process.returncode}:\n{child.tail()}")
    journals = read_journals(journal_dir)
    names = [f"pusher-{i}" for i in range(args.pushers)] + [f"claimer-{i}" for i in range(args.claimers)]
    return all(any(is_success(event) for event in journals.get(name, [])) for name in names)


def dump_stuck(journal_dir: Path, clients: dict[str, list[harness.Child]]) -> dict[str, str]:
    """Stacks of the clients that answered nothing lately (faulthandler, on SIGUSR1), by name."""
    journals = read_journals(journal_dir)
    now = time.time()
    stuck = [
        child
        for role in ROLES
        for child in clients[role]
        if child.alive() and now - last_success(journals.get(child.name, [])) > STUCK_SECONDS
    ]
    for child in stuck:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGUSR1)
    if stuck:
        time.sleep(1.0)
    return {child.name: child.tail(60) for child in stuck}


def stop_clients(clients: dict[str, list[harness.Child]]) -> None:
    """SIGTERM every pusher, claimer and the task producer together (they finish the call in hand);
    SIGKILL whoever is still there after 30 s (a client blocked for good)."""
    group = [child for role in (*ROLES, "task-producer") for child in clients[role] if child.alive()]
    for child in group:
        with contextlib.suppress(ProcessLookupError):
            child.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30.0
    for child in group:
        try:
            child.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log(f"{child.name} did not stop within 30 s: killing it")
            child.kill()


def read_journals(journal_dir: Path) -> dict[str, list[dict[str, Any]]]:
    journals = {}
    for path in sorted(journal_dir.glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        events = []
        for line in lines:
            with contextlib.suppress(ValueError):  # the last line of a killed writer may be cut short
                events.append(json.loads(line))
        journals[path.stem] = events
    return journals


def is_success(event: dict[str, Any]) -> bool:
    return "err" not in event and event.get("op") in ("push", "claim", "empty", "ack")


def last_success(events: list[dict[str, Any]]) -> float:
    return max((event["t"] for event in events if is_success(event)), default=0.0)


# -- after the load ---------------------------------------------------------------------------------


#: However large the backlog, the drain gives up after this long.
DRAIN_LIMIT_SECONDS = 900.0


def drain(db: Any, seconds: float) -> dict[str, Any]:
    """Claim and ack what is left; the uids drained.

    It stops once the queue is empty, or after ``seconds`` without taking anything (leases of the
    run end within them): a backlog of any size is drained as long as it keeps moving, within
    DRAIN_LIMIT_SECONDS.
    """
    from django_fdbqueue import service
    from django_fdbqueue.fdbapi import FDBError

    limit = time.monotonic() + DRAIN_LIMIT_SECONDS
    deadline = time.monotonic() + seconds
    drained: list[dict[str, Any]] = []
    errors: collections.Counter[int] = collections.Counter()
    while time.monotonic() < min(deadline, limit):
        try:
            lease = service.claim(db, QUEUE, lease=30, wait=1)
            if lease is None:
                info = service.get_queue(db, QUEUE)
                if info.size == info.leased == info.delayed == 0:
                    break
                continue
            drained.append({"uid": lease.item.value["uid"], "id": lease.item.id})
            service.ack(db, lease.receipt)
            deadline = time.monotonic() + seconds
        except FDBError as error:
            errors[error.code] += 1
            time.sleep(RETRY_PAUSE)
    info = service.get_queue(db, QUEUE)
    return {
        "items": drained,
        "errors": dict(errors),
        "size": info.size,
        "leased": info.leased,
        "delayed": info.delayed,
        "dead": info.dead,
        "pushed": info.pushed,
        "popped": info.popped,
    }


def tasks_of(journal_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Every enqueued task's outcome (waiting, bounded, for the worker to finish them)."""
    from load_store import wait_for_tasks

    events = read_journals(journal_dir).get("tasks", [])
    ids = [event["id"] for event in events if "id" in event]
    errors = [event["error"] for event in events if "error" in event]
    summary = wait_for_tasks(ids, 30.0 + 4 * args.timeout)["summary"]
    summary["enqueue_errors"] = errors
    return summary


def clear_root(db: Any) -> None:
    """Leave the cluster as found: the run's keys go (a given cluster is someone's)."""
    from django_fdbqueue.connection import root_subspace

    space = root_subspace().range()
    with contextlib.suppress(Exception):
        del db[space.start : space.stop]


# -- checks -------------------------------------------------------------------------------------


@dataclass
class Ledger:
    """The journals folded per item: acknowledged pushes, claims and acks."""

    pushed: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    push_errors: collections.Counter[int] = field(default_factory=collections.Counter)
    claims: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: collections.defaultdict(list))
    acked: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: collections.defaultdict(list))
    claim_errors: collections.Counter[int] = field(default_factory=collections.Counter)
    ack_errors: collections.Counter[Any] = field(default_factory=collections.Counter)
    #: Items whose ack failed with an FDBError and then found the lease gone: that failed attempt
    #: may have committed (a 1031 or 1025 has an unknown outcome), so the item may be consumed.
    acks_in_doubt: set[str] = field(default_factory=set)
    empties: int = 0
    _failed_acks: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, journals: dict[str, list[dict[str, Any]]]) -> "Ledger":
        ledger = cls()
        for name, events in journals.items():
            for event in events:
                ledger.add(name, event)
        return ledger

    def add(self, name: str, event: dict[str, Any]) -> None:
        op, error = event.get("op"), event.get("err")
        if op == "push":
            if error is None:
                self.pushed[event["uid"]].add(event["id"])
            else:
                self.push_errors[error] += 1
        elif op == "claim":
            if error is None:
                self.claims[event["id"]].append({**event, "by": name})
            else:
                self.claim_errors[error] += 1
        elif op == "ack":
            if error is None:
                self.acked[event["id"]].append(event)
            elif isinstance(error, int):
                self.ack_errors[error] += 1
                self._failed_acks.add(event["id"])
            else:
                self.ack_errors[error] += 1
                if event["id"] in self._failed_acks:
                    self.acks_in_doubt.add(event["id"])
        elif op == "empty":
            self.empties += 1


def held_twice(ledger: Ledger) -> list[str]:
    """Items a second claim took before the first claim's lease could have ended, or after its ack."""
    found = []
    for item_id, claims in ledger.claims.items():
        ordered = sorted(claims, key=lambda claim: claim["t0"])
        acks = sorted(ack["t"] for ack in ledger.acked.get(item_id, []))
        for first, second in zip(ordered, ordered[1:]):
            # The second claim committed before its answer (t); the first lease ran until `until`.
            if second["t"] < first["until"] or any(ack < second["t0"] for ack in acks):
                found.append(item_id)
                break
    return found


def resume_lags(journals: dict[str, list[dict[str, Any]]], recovered_at: float) -> dict[str, float | None]:
    """Per client: seconds from the cluster's recovery to its first call begun after it that succeeded."""
    lags: dict[str, float | None] = {}
    for name, events in journals.items():
        if not name.startswith(ROLES):
            continue
        first = next((event["t"] for event in events if is_success(event) and event["t0"] >= recovered_at), None)
        lags[name] = None if first is None else round(first - recovered_at, 2)
    return lags


def stalls(journals: dict[str, list[dict[str, Any]]], killed_at: float) -> dict[str, float]:
    """Per client: the longest gap between successes around and after the kill."""
    longest: dict[str, float] = {}
    for name, events in journals.items():
        if not name.startswith(ROLES):
            continue
        times = sorted(event["t"] for event in events if is_success(event) and event["t"] >= killed_at - 5)
        gaps = [later - earlier for earlier, later in zip(times, times[1:])]
        longest[name] = round(max(gaps, default=0.0), 2)
    return longest


def harness_checks(report: dict[str, Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    """What the fault run must show: every acknowledged push delivered, none twice, and the rest.

    Long: one flat list of checks, each a few lines, read top to bottom as the report prints them.
    """
    from load_checks import Checks

    checks = Checks()
    journals = report.pop("journals")
    ledger = Ledger.of(journals)
    drained = report["drain"]
    delivered = {claim["uid"] for item_id in ledger.acked for claim in ledger.claims.get(item_id, [])}
    delivered |= {item["uid"] for item in drained["items"]}
    in_doubt = {claim["uid"] for item_id in ledger.acks_in_doubt for claim in ledger.claims.get(item_id, [])}
    lost = sorted(set(ledger.pushed) - delivered - in_doubt)
    checks.add(
        "every acknowledged push delivered",
        not lost and bool(ledger.pushed),
        f"{len(ledger.pushed)} pushes acknowledged, {len(lost)} never delivered {lost[:5]}"
        f"{f', {len(in_doubt)} acked by an attempt in doubt' if in_doubt else ''}",
    )
    twice = {uid: ids for uid, ids in ledger.pushed.items() if len(ids) > 1}
    checks.add(
        "each dedup key stored one item", not twice, f"{len(twice)} keys with several items {list(twice.items())[:3]}"
    )
    double = held_twice(ledger)
    checks.add(
        "no item held by two consumers at once",
        not double,
        f"{sum(len(claims) for claims in ledger.claims.values())} claims of {len(ledger.claims)} items; "
        f"overlapping: {double[:5]}",
    )
    recovered_at = report["recovered_at"]
    checks.add(
        "the cluster recovered",
        recovered_at is not None,
        "never" if recovered_at is None else f"{recovered_at - report['killed_at']:.2f} s after the kill",
    )
    bound = 2 * args.timeout + args.wait + 5.0
    lags = resume_lags(journals, recovered_at or report["end"])
    late = {name: lag for name, lag in lags.items() if lag is None or lag > bound}
    checks.add(
        "every client carried on after the recovery",
        not late and recovered_at is not None,
        f"within {max((lag for lag in lags.values() if lag is not None), default=0):.2f} s "
        f"(bound {bound:g} s); late or never: {late}",
    )
    checks.add(
        "no client blocked at the end",
        not report["stacks"],
        f"all answered in their last {STUCK_SECONDS:g} s"
        if not report["stacks"]
        else "blocked: " + "; ".join(f"{name}:\n{stack}" for name, stack in report["stacks"].items()),
    )
    leftover = {key: drained[key] for key in ("size", "leased", "delayed", "dead") if drained[key]}
    checks.add(
        "the queue's counters balance after the drain",
        not leftover and drained["pushed"] == drained["popped"],
        f"pushed {drained['pushed']}, consumed {drained['popped']}, left {leftover or 'nothing'}",
    )
    tasks = report["tasks"]
    bad = {status: count for status, count in tasks["statuses"].items() if status != "SUCCESSFUL"}
    # An enqueue that raised (a timeout during the recovery) was refused or is in doubt: the
    # producer does not retry it, so only the tasks it was told were enqueued are accounted.
    checks.add(
        "every enqueued task ran",
        not bad and tasks["enqueued"] > 0,
        f"{tasks['enqueued']} tasks: {tasks['statuses']}; {len(tasks['enqueue_errors'])} enqueues raised "
        f"{sorted(set(tasks['enqueue_errors']))[:2]}",
    )
    report["figures"] = figures(report, ledger, lags, journals)
    return checks.items


def figures(
    report: dict[str, Any], ledger: Ledger, lags: dict[str, float | None], journals: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    recovered_at = report["recovered_at"]
    return {
        "pushes_acknowledged": len(ledger.pushed),
        "push_errors": dict(ledger.push_errors),
        "claims": sum(len(claims) for claims in ledger.claims.values()),
        "acks": sum(len(acks) for acks in ledger.acked.values()),
        "empty_claims": ledger.empties,
        "claim_errors": dict(ledger.claim_errors),
        "ack_errors": dict(ledger.ack_errors),
        "drained": len(report["drain"]["items"]),
        "recovery_s": None if recovered_at is None else round(recovered_at - report["killed_at"], 2),
        "probe_longest_failure_s": report["probe_longest_failure_s"],
        "resume_after_recovery_s": lags,
        "longest_stall_s": stalls(journals, report["killed_at"]),
        "tasks": report["tasks"]["statuses"],
    }


# -- the report ---------------------------------------------------------------------------------


def render(report: dict[str, Any]) -> str:
    config, numbers = report["config"], report["figures"]
    lines = [
        f"Cluster faults: 3 fdbserver processes ({config['storage']}), {config['pushers']} pushers, "
        f"{config['claimers']} claimers (wait={config['wait_s']:g} s), a task worker; "
        f"TIMEOUT {config['timeout_s']:g} s; fdbserver {config['kill_index']} SIGKILLed {config['kill_at_s']:g} s "
        f"into {config['duration_s']:g} s; {config['cpus']} CPUs",
        "",
        f"Items: {numbers['pushes_acknowledged']} pushes acknowledged "
        f"({numbers['push_errors'] or 'no'} failed attempts, retried), {numbers['claims']} claims, "
        f"{numbers['acks']} acks, {numbers['empty_claims']} empty claims, {numbers['drained']} drained afterwards",
        f"Errors met: claim {numbers['claim_errors'] or 'none'}, ack {numbers['ack_errors'] or 'none'}",
        f"Recovery: first commit {numbers['recovery_s']} s after the kill (longest stretch without a commit "
        f"{numbers['probe_longest_failure_s']} s)",
        "Clients' first success after the recovery (s): " + json.dumps(numbers["resume_after_recovery_s"]),
        "Clients' longest stall around the kill (s): " + json.dumps(numbers["longest_stall_s"]),
        "Tasks: " + json.dumps(numbers["tasks"]),
        "",
    ]
    lines += harness.verdicts(report)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        role, config_path, index = argv[1], argv[2], int(argv[3])
        return child_main(role, config_path, index)
    return harness.main(argv, parse_args, run, render)


if __name__ == "__main__":
    sys.exit(main())
