"""The load run's queues and the store after the run: a snapshot of every queue, the drain that
consumes what is left, the task results, and the store file itself (online backup, integrity)."""

from __future__ import annotations

import collections
import sqlite3
import time
from pathlib import Path
from typing import Any

import harness
from harness import RunFailed, log
from load_journals import Take

QUEUES = [
    {"name": "load.fifo.1", "kind": "fifo", "max_attempts": None},
    {"name": "load.fifo.2", "kind": "fifo", "max_attempts": None},
    {"name": "load.prio.1", "kind": "priority", "max_attempts": None},
    {"name": "load.prio.2", "kind": "priority", "max_attempts": 2},
]


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
        counts[name] = {
            "pushed": info.pushed,
            "popped": info.popped,
            "ready": info.size,
            "leased": info.leased,
            "delayed": info.delayed,
            "dead": info.dead,
        }
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
                take = Take(
                    answered_at,
                    answered_at - asked_at,
                    60.0,
                    "drain",
                    "drain",
                    sent=asked_at,
                    until=lease.lease_expires_at.timestamp(),
                )
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
        "taken": taken,
        "takes": takes,
        "dead": dead,
        "empty": empty,
        "summary": {
            "claimed_and_acked": len(taken),
            "dead_letters_deleted": len(dead),
            "seconds": round(time.monotonic() - started, 2),
            "store_empty_after": empty,
        },
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


def integrity_check(path: Path) -> str:
    """SQLite's own verdict on the store file (``ok`` when sound)."""
    conn = sqlite3.connect(str(path), timeout=30)
    try:
        return "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check").fetchall())
    finally:
        conn.close()


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
    lags = [
        (record.finished_us - record.enqueued_us) / 1000
        for record in records.values()
        if record is not None and record.finished and getattr(record, "finished_us", None)
    ]
    attempts = collections.Counter(len(record.worker_ids) for record in records.values() if record is not None)
    return {
        "records": records,
        "summary": {
            "enqueued": len(task_ids),
            "statuses": dict(statuses),
            "attempts": {str(key): value for key, value in sorted(attempts.items())},
            "enqueue_to_finish_p50_ms": _round(harness.percentile(lags, 0.5)),
            "enqueue_to_finish_p99_ms": _round(harness.percentile(lags, 0.99)),
        },
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
