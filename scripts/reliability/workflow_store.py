"""The store of the workflows bench (``workflows.py``): a local cluster or the embedded engine,
the settings every process of the run reads, and what the bench measures on it besides time.

- ``open_store``: a one-process FoundationDB cluster on loopback whose commits take
  ``--commit-latency`` (``LocalCluster``, binaries found through ``FDB_HOME``), or the embedded
  engine's file in the run's directory; then Django set up in the driver on the run's settings.
- ``commit_counter``: how many transactions with writes committed while something ran. On a
  cluster, the commit proxies' counters in the status document
  (``cluster.workload.transactions.committed.counter``, and ``conflicted``), which count the
  cluster's own transactions too (about one a second here: its time keeper); they are
  refreshed about every 5 s, so a count waits for a refresh before and after, and says how long
  that window was. On the embedded engine, the rows its commits add to the store's conflict
  history, read every 0.2 s (the rows stay for several seconds, so none is missed); it counts
  no conflicts.
- ``cpu_seconds``: user + system CPU of given processes, from ``/proc/<pid>/stat``.
- ``read_records``: task results by id, a page per transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import harness
from harness import RunEnv, RunFailed, log

SETTINGS_MODULE = "workflow_settings"
#: The task queue the pool of workers runs (``tasks.default``), and the one of the chain rows.
QUEUE_NAME = "default"
CHAIN_QUEUE_NAME = "chain"
STATUS_KEY = b"\xff\xff/status/json"
#: The status document's counters are refreshed about this often (the proxies' metrics).
STATUS_REFRESH_SECONDS = 5.0


@dataclass
class Store:
    """What the run's processes share: the engine, their environment, the cluster if any."""

    engine: str
    directory: Path
    env: dict[str, str]
    cluster: Any = None
    latency: dict[str, Any] = field(default_factory=dict)

    @property
    def server_pids(self) -> list[int]:
        return [pid for pid in (self.cluster.pids if self.cluster else []) if pid]

    @property
    def store_path(self) -> Path:
        return self.directory / "fdbqueue.sqlite3"


def write_settings(directory: Path, fdbqueue: dict[str, Any] | None) -> None:
    """The run's settings module: the demo's run settings, the chain rows' task queue added, and
    on a cluster its ``FDBQUEUE``."""
    lines = [
        "from demo.settings_load import *  # noqa: F401,F403",
        "from demo.settings_load import FDBQUEUE as _RUN_FDBQUEUE, TASKS as _RUN_TASKS",
        "",
        "TASKS = {alias: {**config, 'QUEUES': [*config.get('QUEUES', ['default']), "
        f"{CHAIN_QUEUE_NAME!r}]}} for alias, config in _RUN_TASKS.items()}}",
    ]
    if fdbqueue is not None:
        lines += [
            "FDBQUEUE = {key: value for key, value in _RUN_FDBQUEUE.items() if key not in ('PATH', 'FAULTS')}",
            f"FDBQUEUE.update({fdbqueue!r})",
        ]
    (directory / f"{SETTINGS_MODULE}.py").write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_environ(directory: Path, task_lease: float) -> dict[str, str]:
    env = RunEnv(directory, task_lease=task_lease).environ(faults=False)
    env["DJANGO_SETTINGS_MODULE"] = SETTINGS_MODULE
    env["PYTHONPATH"] = os.pathsep.join([str(directory), env["PYTHONPATH"]])
    return env


@contextlib.contextmanager
def open_store(engine: str, directory: Path, task_lease: float, commit_latency: float) -> Iterator[Store]:
    """The run's store, with Django set up in this process on it; a cluster is stopped at the end."""
    from cluster_faults import client_library, setup_django

    if engine == "embedded":
        write_settings(directory, None)
        store = Store(engine, directory, run_environ(directory, task_lease))
        setup_django(store.env)
        yield _probed(store)
        return
    cluster = _start_cluster(commit_latency)
    try:
        fdbqueue = {
            "ENGINE": "foundationdb",
            "CLUSTER_FILE": cluster.cluster_file,
            "CLIENT_LIBRARY": client_library(),
            "ROOT": ("fdbqueue-workflows-bench", uuid.uuid4().hex),
        }
        write_settings(directory, fdbqueue)
        store = Store(engine, directory, run_environ(directory, task_lease), cluster)
        setup_django(store.env)
        yield _probed(store)
    finally:
        cluster.stop()


def _start_cluster(commit_latency: float) -> Any:
    from cluster_faults import client_library
    from django_fdbqueue.testing.binaries import BinariesNotFound
    from django_fdbqueue.testing.cluster import ClusterError, LocalCluster

    if client_library() is None:
        raise RunFailed(
            "FoundationDB's client library (libfdb_c) was not found: set FDB_HOME, or use --engine embedded"
        )
    log(f"starting a one-process cluster, commits of {commit_latency * 1000:g} ms")
    try:
        return LocalCluster(commit_latency=commit_latency).start()
    except (BinariesNotFound, ClusterError) as error:
        raise RunFailed(str(error)) from None


def _probed(store: Store) -> Store:
    """The store's commit and read-version latency (medians of 30), as the bench prints it."""
    from django_fdbqueue.bench import latency
    from django_fdbqueue.connection import get_database, root_subspace

    measured = latency.probe(get_database(), latency.probe_key(root_subspace(), uuid.uuid4().hex))
    store.latency = measured.as_data()
    return store


# -- commits -----------------------------------------------------------------------------------


@dataclass
class Counted:
    """What a counter saw while something ran: commits (transactions with writes), conflicts
    (1020; None where not counted), and the seconds between the two readings (None: exact)."""

    commits: int
    conflicts: int | None = None
    window_s: float | None = None


def commit_counter(store: Store) -> "ClusterCommits | EmbeddedCommits":
    return EmbeddedCommits(store.store_path) if store.engine == "embedded" else ClusterCommits()


class ClusterCommits:
    """Commits and conflicts counted by the cluster's commit proxies (the status document)."""

    def count(self, work: Callable[[], Any]) -> tuple[Counted, Any]:
        """Transactions with writes committed (and conflicts) while ``work`` ran, the cluster's
        own included (about one a second), over the window between two refreshes of the
        counters around it; and what ``work`` returned."""
        before, begun = self._fresh()
        result = work()
        after, ended = self._fresh()
        counted = Counted(
            after["committed"] - before["committed"],
            after["conflicted"] - before["conflicted"],
            round(ended - begun, 2),
        )
        return counted, result

    def _fresh(self, limit: float = 2.5 * STATUS_REFRESH_SECONDS) -> tuple[dict[str, int], float]:
        """The counters once they were refreshed after this call began, and when that was seen
        (or after ``limit`` s without a change)."""
        first = _counters()
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            time.sleep(0.25)
            now = _counters()
            if now != first:
                return now, time.monotonic()
        return _counters(), time.monotonic()


def _counters() -> dict[str, int]:
    from django_fdbqueue.connection import get_database

    status = json.loads(bytes(get_database()[STATUS_KEY]))
    transactions = status["cluster"]["workload"]["transactions"]
    return {name: int(transactions[name]["counter"]) for name in ("committed", "conflicted")}


class EmbeddedCommits:
    """Commits of the embedded engine: each adds a row to its conflict history (``commit_ranges``,
    kept several seconds), so reading the new rows every 0.2 s misses none."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def count(self, work: Callable[[], Any]) -> tuple[Counted, Any]:
        conn = sqlite3.connect(str(self.path), timeout=10)
        try:
            (last,) = conn.execute("SELECT MAX(version) FROM commit_ranges").fetchone()
            state = {"last": last or 0, "seen": 0}
            stop = threading.Event()
            poller = threading.Thread(target=self._poll, args=(state, stop), daemon=True)
            poller.start()
            try:
                result = work()
            finally:
                stop.set()
                poller.join(30)
            self._read(conn, state)
            return Counted(state["seen"]), result
        finally:
            conn.close()

    def _poll(self, state: dict[str, int], stop: threading.Event) -> None:
        conn = sqlite3.connect(str(self.path), timeout=10)
        try:
            while not stop.wait(0.2):
                self._read(conn, state)
        finally:
            conn.close()

    @staticmethod
    def _read(conn: sqlite3.Connection, state: dict[str, int]) -> None:
        rows = conn.execute("SELECT version FROM commit_ranges WHERE version > ?", (state["last"],)).fetchall()
        if rows:
            state["seen"] += len(rows)
            state["last"] = max(version for (version,) in rows)


# -- processes, results, queues ---------------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (one that is gone counts 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            continue
        fields = stat.rpartition(b") ")[2].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of the line
    return total / ticks


def read_records(ids: list[str], page: int = 200) -> list[Any]:
    """The task results (``results.Record``, or None when missing) of ``ids``, in order."""
    from django_fdbqueue.connection import get_database

    found: list[Any] = []
    for start in range(0, len(ids), page):
        found += _records_page(get_database(), ids[start : start + page])
    return found


def _records_page(db: Any, ids: list[str]) -> list[Any]:
    from django_fdbqueue.fdbapi import transactional
    from django_fdbqueue.tasks import results

    @transactional
    def read(tr: Any) -> list[Any]:
        futures = [tr[results.record_key(result_id)] for result_id in ids]
        return [results.Record.loads(bytes(raw)) if raw.present() else None for raw in futures]

    return read(db)


def queue_left(queue_name: str = QUEUE_NAME) -> dict[str, int]:
    """What a task queue still holds: ready, leased, delayed and dead items (zeros when empty)."""
    from django_fdbqueue import service
    from django_fdbqueue.connection import get_database
    from django_fdbqueue.exceptions import QueueNotFound

    try:
        info = service.get_queue(get_database(), f"tasks.{queue_name}")
    except QueueNotFound:
        return {"ready": 0, "leased": 0, "delayed": 0, "dead": 0}
    return {"ready": info.size, "leased": info.leased, "delayed": info.delayed, "dead": info.dead}


def wait_queue_empty(seconds: float, queue_name: str = QUEUE_NAME) -> dict[str, int]:
    """Wait (bounded) until the task queue holds nothing; what it holds then."""
    left = queue_left(queue_name)
    deadline = time.monotonic() + seconds
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(0.25)
        left = queue_left(queue_name)
    return left


def wait_finished(handle: Any, seconds: float, what: str) -> None:
    """Refresh a workflow's handle until it finished; RunFailed after ``seconds``."""

    def finished() -> bool:
        handle.refresh()
        return bool(handle.is_finished)

    harness.wait_until(finished, seconds, what, interval=0.1)
