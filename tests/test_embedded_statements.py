"""The SQL the embedded engine runs for one push and one pop: what its speed rests on.

On one machine the cost of a transaction is mostly the statements it sends SQLite and the
pages its commit writes, so these tests pin the shape of the two commonest transactions. Each
assertion names an optimisation that a change could undo without failing any semantic test:

- a commit writes one history row (write ranges and new version), no separate version row;
- atomic operations are applied inside SQLite, with no read of the counters beforehand;
- a read of one row fetches one row, not one more to see whether the range goes on;
- pruning the history goes through the primary key, not a scan of the commit times.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import pytest

from django_fdbqueue import service
from django_fdbqueue.engines.embedded import storage as storage_module

QUEUE = "statements"


@pytest.fixture
def sql_statements(fdbqueue_db, engine_name, monkeypatch):
    """``with sql_statements() as seen:`` collects the SQL the embedded store runs meanwhile."""
    assert engine_name == "embedded", "SQL statements are the embedded engine's"
    storage = fdbqueue_db._storage
    seen: list[str] = []
    recording = [False]

    def trace(statement: str) -> None:
        if recording[0]:
            seen.append(" ".join(statement.split()))

    for conn in list(storage._pool):
        conn.set_trace_callback(trace)
    real_connect = storage._connect

    def connect() -> Any:
        conn = real_connect()
        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(storage, "_connect", connect)

    @contextlib.contextmanager
    def record() -> Iterator[list[str]]:
        seen.clear()
        recording[0] = True
        try:
            yield seen
        finally:
            recording[0] = False

    return record


def _warm(db: Any) -> None:
    """A queue whose catalog entry is cached, as it is for every operation after the first."""
    service.create_queue(db, QUEUE, "priority")
    service.push(db, QUEUE, "warm-up", priority=1)
    assert service.pop(db, QUEUE, "min").value == "warm-up"


def _selects(seen: list[str]) -> list[str]:
    return [statement for statement in seen if statement.startswith("SELECT")]


def test_a_push_reads_only_its_snapshot_and_writes_one_history_row(fdbqueue_db, sql_statements):
    _warm(fdbqueue_db)
    with sql_statements() as seen:
        service.push(fdbqueue_db, QUEUE, {"n": 1}, priority=1)
    assert seen[0] == "BEGIN" and seen[-1] == "COMMIT"
    # The snapshot's one query (read version and metadata version); the counters are not read.
    assert len(_selects(seen)) == 1, seen
    assert "MAX(version) FROM commit_ranges" in _selects(seen)[0]
    assert sum("INSERT INTO commit_ranges" in s for s in seen) == 1
    assert not [s for s in seen if "meta" in s and "commit_ranges" not in s], "a commit touched meta"
    assert not [s for s in seen if " IN (" in s], "the atomic operations' keys were read first"
    assert any("ON CONFLICT" in s for s in seen), "the counters were not updated in SQLite"


def test_a_pop_reads_the_snapshot_the_due_items_and_one_head_row(fdbqueue_db, sql_statements):
    _warm(fdbqueue_db)
    service.push(fdbqueue_db, QUEUE, {"n": 1}, priority=1)
    service.push(fdbqueue_db, QUEUE, {"n": 2}, priority=1)
    with sql_statements() as seen:
        assert service.pop(fdbqueue_db, QUEUE, "min").value == {"n": 1}
    # Snapshot, what is due among the hidden items, the head of the ready items: one row each,
    # with no second query asking whether the head's range goes on.
    assert len(_selects(seen)) == 3, seen
    assert not [s for s in seen if " IN (" in s]
    assert sum("INSERT INTO commit_ranges" in s for s in seen) == 1


def test_forgetting_history_goes_through_the_primary_key(fdbqueue_db, sql_statements, monkeypatch):
    _warm(fdbqueue_db)
    monkeypatch.setattr(fdbqueue_db._storage, "_next_prune", 0.0)  # due now
    with sql_statements() as seen:
        service.push(fdbqueue_db, QUEUE, {"n": 1}, priority=1)
    pruning = [s for s in seen if "MAX(version) FROM commit_ranges WHERE" in s]
    assert pruning and all("committed_at" not in s for s in pruning), seen


def test_old_history_is_forgotten_and_the_newest_row_keeps_the_version(embedded_db):
    """Rows older than the age limit go (and a transaction that read before them is too old to
    commit); the newest row stays, as it holds the store's version."""
    storage = embedded_db._storage
    conn = storage.acquire()
    try:  # a store whose history is all ancient: versions 1 to 3
        conn.execute("DELETE FROM commit_ranges")
        conn.executemany(
            "INSERT INTO commit_ranges (version, committed_at, ranges) VALUES (?, 0, x'')", [(1,), (2,), (3,)]
        )
    finally:
        storage.release(conn)
    storage._next_prune = 0.0
    embedded_db[b"a"] = b"1"  # this commit prunes
    conn = storage.acquire()
    try:
        versions = [v for (v,) in conn.execute("SELECT version FROM commit_ranges ORDER BY version")]
        (pruned_through,) = conn.execute("SELECT value FROM meta WHERE name = 'pruned_through'").fetchone()
    finally:
        storage.release(conn)
    assert len(versions) == 1 and versions[0] > 3 and pruned_through == 3
    assert embedded_db.create_transaction().get_read_version().wait() == versions[0]
    with pytest.raises(storage_module.TooOldError):
        storage.commit(2, [(b"a", b"b")], [], lambda conn, version: None)
