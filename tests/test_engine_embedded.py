"""Embedded-engine behaviours a real cluster cannot be asked to show on demand.

Fault injection (1020 and both forms of 1021), durability across a killed process, conflicts and
versionstamps across processes sharing one SQLite file, the 5-second age limit (1007) with a fake
clock, the per-transaction timeout (1031) and retry limit, key-selector clamping at the ends
of an empty store, and watches (across processes, limits, cancellation). The shared API semantics live in test_engine_conformance.py.
"""

from __future__ import annotations

import json
import os
import queue
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from django_fdbqueue.engines.embedded import EmbeddedDatabase
from django_fdbqueue.engines.embedded.transaction import FIRST_BATCH_ROWS
from django_fdbqueue.fdbapi import FDBError, KeySelector, fdb, transactional

Versionstamp = fdb.tuple.Versionstamp

WAIT = 30.0
REPO_ROOT = Path(__file__).resolve().parents[1]

NOT_COMMITTED = 1020
COMMIT_UNKNOWN_RESULT = 1021
TRANSACTION_TOO_OLD = 1007
TRANSACTION_TIMED_OUT = 1031

SPACE = fdb.Subspace(("embedded-test",))


def key(*parts: Any) -> bytes:
    return SPACE.pack(parts)


def le64(n: int) -> bytes:
    return struct.pack("<q", n)


def from_le64(value: Any) -> int:
    return struct.unpack("<q", bytes(value))[0] if value is not None else 0


def expect_error(code: int, action: Callable[[], Any]) -> FDBError:
    with pytest.raises(FDBError) as info:
        action()
    assert info.value.code == code, f"expected FDBError {code}, got {info.value.code}: {info.value}"
    return info.value


def commit_outcome(tr: Any) -> Any:
    try:
        tr.commit().wait()
    except FDBError as error:
        return error.code
    return "committed"


class FakeClock:
    """A monotonic clock the test advances by hand."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def open_db(tmp_path):
    """Open embedded databases (default: tmp_path/store.sqlite3) and close them all afterwards."""
    opened: list[Any] = []

    def factory(name: str = "store.sqlite3", **kwargs: Any) -> Any:
        database = EmbeddedDatabase(str(tmp_path / name), **kwargs)
        opened.append(database)
        return database

    yield factory
    for database in reversed(opened):
        database.close()


# --------------------------------------------------------------------------- fault injection


def test_fault_not_committed_fails_every_commit_with_1020_and_writes_nothing(embedded_db):
    """faults not_committed=1.0: every commit fails with 1020 and none of its writes lands."""
    embedded_db.faults.configure(not_committed=1.0)
    for i in range(3):
        tr = embedded_db.create_transaction()
        tr[key("a", i)] = b"x"
        expect_error(NOT_COMMITTED, lambda: tr.commit().wait())
    embedded_db.faults.configure()
    tr = embedded_db.create_transaction()
    assert list(tr.get_range(SPACE.range().start, SPACE.range().stop)) == []


def test_fault_unknown_applied_raises_1021_but_the_write_is_there(embedded_db):
    """faults unknown_applied=1.0: commit raises 1021 although its mutations were applied."""
    embedded_db.faults.configure(unknown_applied=1.0)
    tr = embedded_db.create_transaction()
    tr[key("a")] = b"applied"
    tr.add(key("n"), le64(1))
    expect_error(COMMIT_UNKNOWN_RESULT, lambda: tr.commit().wait())
    embedded_db.faults.configure()
    assert embedded_db[key("a")] == b"applied"
    assert embedded_db[key("n")] == le64(1)


def test_fault_unknown_not_applied_raises_1021_and_the_write_is_not_there(embedded_db):
    """faults unknown_not_applied=1.0: commit raises 1021 and its mutations were not applied."""
    embedded_db.faults.configure(unknown_not_applied=1.0)
    tr = embedded_db.create_transaction()
    tr[key("a")] = b"lost"
    expect_error(COMMIT_UNKNOWN_RESULT, lambda: tr.commit().wait())
    embedded_db.faults.configure()
    assert embedded_db[key("a")] is None


def test_an_unknown_applied_commit_conflicts_with_readers_like_any_commit(embedded_db):
    """A commit that happened but answered 1021 is in the conflict history: a transaction that
    read its key before it must fail with 1020, or it would act on a value that no longer is."""
    embedded_db[key("a")] = b"0"
    reader = embedded_db.create_transaction()
    assert reader[key("a")] == b"0"
    embedded_db.faults.fail_next("unknown_applied")
    writer = embedded_db.create_transaction()
    writer[key("a")] = b"1"
    expect_error(COMMIT_UNKNOWN_RESULT, lambda: writer.commit().wait())
    reader[key("b")] = b"x"
    assert commit_outcome(reader) == NOT_COMMITTED
    assert embedded_db[key("a")] == b"1" and embedded_db[key("b")] is None


def test_an_unknown_applied_commit_wakes_watches_at_once(open_db, monkeypatch):
    """It changed the key, so watches must hear of it as of any commit: not only at the next
    poll of the store's version (slowed to a minute here), which would leave a waiting claim
    asleep although an item is there."""
    database = open_db("unknown.sqlite3", watch_poll_interval=60.0)
    looked = threading.Event()
    look = database._watcher.check_now

    def look_and_tell() -> None:
        look()
        looked.set()

    monkeypatch.setattr(database._watcher, "check_now", look_and_tell)
    database[key("w")] = b"0"
    tr = database.create_transaction()
    watch = tr.watch(key("w"))
    tr.commit().wait()
    assert looked.wait(WAIT)  # the watcher's first look, at the value before the change
    database.faults.fail_next("unknown_applied")
    writer = database.create_transaction()
    writer[key("w")] = b"1"
    expect_error(COMMIT_UNKNOWN_RESULT, lambda: writer.commit().wait())
    fired = threading.Event()
    watch.on_ready(lambda _f: fired.set())
    assert fired.wait(10.0), "a commit that answered 1021 did not wake the watch"


def test_faults_given_to_the_constructor_as_a_dict(open_db):
    """EmbeddedDatabase(faults={...}) switches injection on from the start."""
    database = open_db(faults={"not_committed": 1.0})
    tr = database.create_transaction()
    tr[key("a")] = b"x"
    expect_error(NOT_COMMITTED, lambda: tr.commit().wait())


def test_faults_configured_to_zero_stop_failing(embedded_db):
    """configure() with no fractions switches injection off again: every commit lands, as written."""
    embedded_db.faults.configure(not_committed=1.0)
    tr = embedded_db.create_transaction()
    tr[key("a", "refused")] = b"x"
    assert commit_outcome(tr) == NOT_COMMITTED  # injection was on
    embedded_db.faults.configure(not_committed=0.0, unknown_applied=0.0, unknown_not_applied=0.0)
    assert not embedded_db.faults.active
    for i in range(20):
        tr = embedded_db.create_transaction()
        tr[key("a", i)] = b"v%d" % i
        assert commit_outcome(tr) == "committed", i
    stored = [
        (bytes(kv.key), bytes(kv.value)) for kv in embedded_db.create_transaction().get_range_startswith(key("a"))
    ]
    assert stored == [(key("a", i), b"v%d" % i) for i in range(20)]  # and nothing of the refused one
    assert set(embedded_db.faults.injected.values()) == {0}


def _fault_pattern(database: Any, commits: int) -> list[Any]:
    outcomes = []
    for i in range(commits):
        tr = database.create_transaction()
        tr[key("p", i)] = b"x"
        outcomes.append(commit_outcome(tr))
    return outcomes


def test_fault_seed_makes_the_failure_pattern_reproducible(open_db):
    """The same seed and fractions give the same sequence of failed commits."""
    first = open_db("one.sqlite3")
    second = open_db("two.sqlite3")
    first.faults.configure(not_committed=0.5, seed=42)
    second.faults.configure(not_committed=0.5, seed=42)
    pattern = _fault_pattern(first, 30)
    assert pattern == _fault_pattern(second, 30)
    assert set(pattern) == {"committed", NOT_COMMITTED}


def test_fault_fraction_is_roughly_the_share_of_failed_commits(embedded_db):
    """not_committed=0.3 fails about 30% of commits (seeded; bounds are loose)."""
    embedded_db.faults.configure(not_committed=0.3, seed=1)
    failed = _fault_pattern(embedded_db, 200).count(NOT_COMMITTED)
    assert 30 <= failed <= 90


def test_transactional_counter_survives_mixed_faults_and_shows_double_apply(embedded_db):
    """Under 30% mixed faults @transactional always completes; 1021-applied commits count twice.

    What this proves: the retry loop hides 1020 and both kinds of 1021 from the caller (every call
    returns), and a read-modify-write is NOT idempotent under commit_unknown_result: when the first
    commit was in fact applied, the retry reads the new value and adds again, so the counter ends
    above the number of calls. That is FoundationDB's documented hazard, reproduced on purpose.
    """
    calls = 60
    attempts = 0
    embedded_db.faults.configure(not_committed=0.1, unknown_applied=0.1, unknown_not_applied=0.1, seed=7)

    @transactional
    def increment(tr) -> None:
        nonlocal attempts
        attempts += 1
        value = tr[key("counter")]
        tr[key("counter")] = le64((from_le64(value) if value.present() else 0) + 1)

    for _ in range(calls):
        increment(embedded_db)
    embedded_db.faults.configure()
    final = from_le64(embedded_db[key("counter")])
    assert attempts > calls, "faults were injected and retried"
    assert final > calls, "some commit reported 1021 was applied and then applied again by the retry"
    assert final <= attempts


def test_unknown_applied_double_apply_is_exactly_the_number_of_1021s(embedded_db):
    """With only unknown_applied faults, counter == calls + 1021s seen: each one applied twice."""
    calls = 40
    seen_1021 = 0
    embedded_db.faults.configure(unknown_applied=0.3, seed=11)
    for _ in range(calls):
        tr = embedded_db.create_transaction()
        while True:
            try:
                value = tr[key("counter")]
                tr[key("counter")] = le64((from_le64(value) if value.present() else 0) + 1)
                tr.commit().wait()
                break
            except FDBError as error:
                seen_1021 += error.code == COMMIT_UNKNOWN_RESULT
                tr.on_error(error).wait()
    embedded_db.faults.configure()
    assert seen_1021 > 0
    assert from_le64(embedded_db[key("counter")]) == calls + seen_1021


def test_idempotent_increment_is_exact_under_mixed_faults(embedded_db):
    """The cure: record an operation id in the same transaction and skip if present -> exactly N."""
    calls = 40
    embedded_db.faults.configure(not_committed=0.1, unknown_applied=0.1, unknown_not_applied=0.1, seed=5)

    @transactional
    def increment_once(tr, op_id: int) -> None:
        if tr[key("done", op_id)].present():
            return
        tr[key("done", op_id)] = b""
        value = tr[key("counter")]
        tr[key("counter")] = le64((from_le64(value) if value.present() else 0) + 1)

    for op_id in range(calls):
        increment_once(embedded_db, op_id)
    embedded_db.faults.configure()
    assert from_le64(embedded_db[key("counter")]) == calls


# --------------------------------------------------------------------------- age limit (1007), fake clock


def test_read_after_more_than_five_seconds_fails_with_1007(open_db):
    """A read more than 5 s after the read version was taken fails with 1007 transaction_too_old."""
    clock = FakeClock()
    database = open_db(clock=clock)
    database[key("a")] = b"v"
    tr = database.create_transaction()
    assert tr[key("a")] == b"v"
    clock.advance(4.9)
    assert tr[key("a")] == b"v", "still inside the 5-second window"
    clock.advance(0.2)
    expect_error(TRANSACTION_TOO_OLD, lambda: tr[key("a")].present())
    expect_error(TRANSACTION_TOO_OLD, lambda: list(tr.get_range(key("a"), key("z"))))


def test_commit_of_an_old_transaction_with_reads_fails_with_1007(open_db):
    """Commit of a read-write transaction whose read version is over 5 s old fails with 1007."""
    clock = FakeClock()
    database = open_db(clock=clock)
    tr = database.create_transaction()
    assert tr[key("a")] == None  # noqa: E711
    tr[key("a")] = b"late"
    clock.advance(6.0)
    expect_error(TRANSACTION_TOO_OLD, lambda: tr.commit().wait())
    assert database[key("a")] is None


def test_commit_of_an_old_read_only_transaction_succeeds(open_db):
    """A read-only transaction whose reads were served commits however old: nothing to resolve."""
    clock = FakeClock()
    database = open_db(clock=clock)
    tr = database.create_transaction()
    assert tr[key("a")] == None  # noqa: E711
    watch = tr.watch(key("a"))
    clock.advance(6.0)
    tr.commit().wait()
    database[key("a")] = b"changed"
    assert _ready_soon(watch), "the old read-only transaction's watch did not start"


def test_on_error_1007_resets_and_the_retry_succeeds(open_db):
    """on_error(1007) retries: the reset transaction takes a fresh read version and commits."""
    clock = FakeClock()
    database = open_db(clock=clock)
    database[key("a")] = b"v"
    tr = database.create_transaction()
    assert tr[key("a")] == b"v"
    clock.advance(6.0)
    error = expect_error(TRANSACTION_TOO_OLD, lambda: tr[key("a")].present())
    tr.on_error(error).wait()
    assert tr[key("a")] == b"v"
    tr[key("b")] = b"retried"
    tr.commit().wait()
    assert database[key("b")] == b"retried"


def test_transactional_retries_transaction_too_old(open_db):
    """@transactional reruns a body whose first attempt outlived the 5-second window."""
    clock = FakeClock()
    database = open_db(clock=clock)
    attempts = 0

    @transactional
    def slow_then_fast(tr) -> None:
        nonlocal attempts
        attempts += 1
        tr[key("a")].present()
        if attempts == 1:
            clock.advance(6.0)
        tr[key("a")] = b"done"

    slow_then_fast(database)
    assert attempts == 2
    assert database[key("a")] == b"done"


def test_age_counts_from_the_read_version_not_from_creation(open_db):
    """The read version is taken at the first read: an idle transaction created long ago can still read."""
    clock = FakeClock()
    database = open_db(clock=clock)
    tr = database.create_transaction()
    clock.advance(60.0)
    assert tr[key("a")] == None  # noqa: E711
    tr[key("a")] = b"ok"
    tr.commit().wait()
    assert database[key("a")] == b"ok"


def test_blind_write_transaction_without_read_version_is_never_too_old(open_db):
    """A transaction that never read gets its read version at commit, so it cannot be too old."""
    clock = FakeClock()
    database = open_db(clock=clock)
    tr = database.create_transaction()
    tr[key("a")] = b"blind"
    clock.advance(60.0)
    tr.commit().wait()
    assert database[key("a")] == b"blind"


def test_blind_versionstamped_insert_takes_no_read_version_and_is_never_too_old(open_db):
    """set_versionstamped_key is not a read: a transaction that only inserts with it commits after 6 s."""
    clock = FakeClock()
    database = open_db(clock=clock)
    log = SPACE["log"]
    tr = database.create_transaction()
    tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"late")
    clock.advance(6.0)
    tr.commit().wait()
    rows = list(database.get_range(log.range().start, log.range().stop))
    assert [kv.value for kv in rows] == [b"late"]


def test_transaction_from_before_the_first_commit_of_a_fresh_store_is_not_too_old(open_db):
    """Read version age is time, not version distance: milliseconds-old read versions never get 1007."""
    first = open_db("fresh.sqlite3")
    second = open_db("fresh.sqlite3")
    tr = first.create_transaction()
    assert tr[key("a")] == None  # noqa: E711 - read version of the empty store
    second[key("other")] = b"x"  # the store's first commit, from another client
    tr[key("a")] = b"mine"
    assert commit_outcome(tr) == "committed"
    assert first[key("a")] == b"mine"


def test_max_transaction_age_is_configurable(open_db):
    """max_transaction_age replaces the 5-second window (here 1 s)."""
    clock = FakeClock()
    database = open_db(clock=clock, max_transaction_age=1.0)
    tr = database.create_transaction()
    tr.get_read_version().wait()
    clock.advance(0.9)
    tr[key("a")].present()
    clock.advance(0.2)
    expect_error(TRANSACTION_TOO_OLD, lambda: tr[key("a")].present())


# --------------------------------------------------------------------------- retry limit and timeout


def test_retry_limit_caps_on_error_retries(open_db):
    """retry_limit=2: on_error retries twice, then re-raises the error it is given."""
    database = open_db(retry_limit=2)
    tr = database.create_transaction()
    tr.on_error(FDBError(NOT_COMMITTED)).wait()
    tr.on_error(FDBError(NOT_COMMITTED)).wait()
    expect_error(NOT_COMMITTED, lambda: tr.on_error(FDBError(NOT_COMMITTED)).wait())


def test_retry_limit_bounds_the_transactional_loop(open_db):
    """@transactional with retry_limit=2 runs the body 3 times, then raises the last error."""
    database = open_db(retry_limit=2)
    attempts = 0

    @transactional
    def always_conflicts(tr) -> None:
        nonlocal attempts
        attempts += 1
        raise FDBError(NOT_COMMITTED)

    expect_error(NOT_COMMITTED, lambda: always_conflicts(database))
    assert attempts == 3


def test_retry_limit_zero_means_no_retry(open_db):
    """retry_limit=0: the first on_error re-raises."""
    database = open_db(retry_limit=0)
    tr = database.create_transaction()
    expect_error(COMMIT_UNKNOWN_RESULT, lambda: tr.on_error(FDBError(COMMIT_UNKNOWN_RESULT)).wait())


def test_timeout_expires_the_transaction_with_1031(open_db):
    """timeout=0.2 s: later operations and commit fail with 1031, on_error re-raises it, reset revives."""
    clock = FakeClock()
    database = open_db(timeout=0.2, clock=clock)
    tr = database.create_transaction()
    assert tr[key("a")] == None  # noqa: E711 - alive at first
    clock.advance(0.25)
    error = expect_error(TRANSACTION_TIMED_OUT, lambda: tr[key("a")].present())

    def write_and_commit() -> None:
        tr[key("a")] = b"x"  # the binding defers this error to commit; raising here is fine too
        tr.commit().wait()

    expect_error(TRANSACTION_TIMED_OUT, write_and_commit)
    expect_error(TRANSACTION_TIMED_OUT, lambda: tr.on_error(error).wait())
    tr.reset()
    assert tr[key("a")] == None  # noqa: E711
    tr[key("a")] = b"after-reset"
    tr.commit().wait()
    assert database[key("a")] == b"after-reset"


def test_timeout_is_not_restarted_by_on_error_and_bounds_retry_loops(open_db):
    """Since API 610 the timeout spans on_error retries: an always-conflicting loop ends with 1031."""
    clock = FakeClock()
    database = open_db(timeout=0.3, clock=clock)
    attempts = 0

    @transactional
    def always_conflicts(tr) -> None:
        nonlocal attempts
        attempts += 1
        if attempts > 100:
            raise RuntimeError("the timeout never ended the retry loop")
        tr[key("a")].present()
        clock.advance(0.1)  # each attempt takes a tenth of a second
        raise FDBError(NOT_COMMITTED)

    expect_error(TRANSACTION_TIMED_OUT, lambda: always_conflicts(database))
    assert 2 <= attempts <= 4


def test_no_timeout_by_default(open_db):
    """Without timeout a transaction lives until its read version is too old (4.9 s here)."""
    clock = FakeClock()
    database = open_db(clock=clock)
    tr = database.create_transaction()
    tr.get_read_version().wait()
    clock.advance(4.9)
    assert tr[key("a")] == None  # noqa: E711


# --------------------------------------------------------------------------- ends of the key space


def test_key_selectors_clamp_to_the_ends_of_an_empty_or_small_store(embedded_db):
    """Off the beginning get_key resolves to b'', off the end to b'\\xff' (FoundationDB's documented rule)."""
    tr = embedded_db.create_transaction()
    assert tr.get_key(KeySelector.first_greater_or_equal(b"a")) == b"\xff"
    assert tr.get_key(KeySelector.last_less_than(b"a")) == b""
    embedded_db[b"m"] = b"1"
    tr = embedded_db.create_transaction()
    assert tr.get_key(KeySelector.first_greater_or_equal(b"a")) == b"m"
    assert tr.get_key(KeySelector.first_greater_than(b"m")) == b"\xff"
    assert tr.get_key(KeySelector.last_less_than(b"m")) == b""
    assert tr.get_key(KeySelector.last_less_or_equal(b"m") - 5) == b""
    assert tr.get_key(KeySelector.first_greater_or_equal(b"a") + 5) == b"\xff"


def test_whole_keyspace_range_read_lists_exactly_the_written_keys(embedded_db):
    """get_range(b'', b'\\xff') over a fresh store returns exactly what was committed, in order."""
    tr = embedded_db.create_transaction()
    tr[b"\x00"] = b"0"
    tr[b"b"] = b"2"
    tr[b"a"] = b"1"
    tr[b"\xfe\xff"] = b"3"
    tr.commit().wait()
    tr = embedded_db.create_transaction()
    assert [(kv.key, kv.value) for kv in tr.get_range(b"", b"\xff")] == [
        (b"\x00", b"0"),
        (b"a", b"1"),
        (b"b", b"2"),
        (b"\xfe\xff", b"3"),
    ]


# --------------------------------------------------------------------------- two handles, one file


def test_two_handles_on_one_file_see_each_others_commits_and_conflict(open_db):
    """Two EmbeddedDatabase objects on one path act as two clients of one database."""
    first = open_db("shared.sqlite3")
    second = open_db("shared.sqlite3")
    first[key("a")] = b"0"
    assert second[key("a")] == b"0"
    tr1 = first.create_transaction()
    assert tr1[key("a")] == b"0"
    second[key("a")] = b"1"
    tr1[key("b")] = b"x"
    assert commit_outcome(tr1) == NOT_COMMITTED
    assert first[key("a")] == b"1"


def test_a_commit_in_place_on_one_handle_conflicts_with_a_reader_of_another(open_db, monkeypatch):
    """The fast path commits on the transaction's own read snapshot. Across handles (as across
    processes) a writer that took it must still make the other handle's reader fail with 1020,
    and that reader, whose snapshot is stale, must not take it."""
    from django_fdbqueue.engines.embedded.storage import Storage

    in_place: list[bool] = []
    real = Storage._commit_in_place

    def spy(self: Any, *args: Any) -> Any:
        version = real(self, *args)
        in_place.append(version is not None)
        return version

    monkeypatch.setattr(Storage, "_commit_in_place", spy)
    first = open_db("shared.sqlite3")
    second = open_db("shared.sqlite3")
    first[key("a")] = b"0"
    reader = first.create_transaction()
    assert reader[key("a")] == b"0"
    writer = second.create_transaction()
    assert writer[key("a")] == b"0"  # a snapshot of its own, the newest state: the fast path
    writer[key("a")] = b"1"
    writer.commit().wait()
    assert in_place == [True]
    reader[key("b")] = b"x"
    assert commit_outcome(reader) == NOT_COMMITTED
    assert in_place == [True, False]  # the stale snapshot could not commit in place
    assert first[key("a")] == b"1" and first[key("b")] is None


def test_a_stale_snapshot_without_conflict_commits_through_the_full_path(open_db):
    """A reader whose snapshot another handle made stale, but who read nothing it wrote, commits."""
    first = open_db("shared.sqlite3")
    second = open_db("shared.sqlite3")
    first[key("a")] = b"0"
    reader = first.create_transaction()
    assert reader[key("a")] == b"0"
    second[key("c")] = b"other"
    reader[key("b")] = b"x"
    assert commit_outcome(reader) == "committed"
    assert (second[key("a")], second[key("b")], second[key("c")]) == (b"0", b"x", b"other")


def test_committed_data_survives_close_and_reopen(open_db):
    """Data committed before close() is there when the file is opened again."""
    database = open_db("durable.sqlite3")
    database[key("a")] = b"kept"
    tr = database.create_transaction()
    tr[key("b")] = b"never committed"
    database.close()
    reopened = open_db("durable.sqlite3")
    assert reopened[key("a")] == b"kept"
    assert reopened[key("b")] is None


# --------------------------------------------------------------------------- other processes

WORKER_SCRIPT = r"""
import json
import struct
import sys

from django_fdbqueue.engines.embedded import EmbeddedDatabase
from django_fdbqueue.fdbapi import FDBError, fdb, transactional


def main():
    db = EmbeddedDatabase(sys.argv[1])
    tr = db.create_transaction()

    def reply(**fields):
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()

    @transactional
    def increment(tr, counter):
        value = tr[counter]
        current = struct.unpack("<q", bytes(value))[0] if value.present() else 0
        tr[counter] = struct.pack("<q", current + 1)

    reply(ready=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        k = bytes.fromhex(cmd.get("key", ""))
        try:
            if op == "get":
                value = tr[k]
                reply(value=bytes(value).hex() if value.present() else None)
            elif op == "snapshot_get":
                value = tr.snapshot[k]
                reply(value=bytes(value).hex() if value.present() else None)
            elif op == "set":
                tr[k] = bytes.fromhex(cmd["value"])
                reply()
            elif op == "commit":
                tr.commit().wait()
                tr = db.create_transaction()
                reply()
            elif op == "reset":
                tr.reset()
                reply()
            elif op == "stamps":
                prefix = fdb.Subspace(rawPrefix=k)
                stamps = []
                for _ in range(cmd["n"]):
                    t = db.create_transaction()
                    t.set_versionstamped_key(
                        prefix.pack_with_versionstamp((fdb.tuple.Versionstamp(),)), cmd["tag"].encode()
                    )
                    future = t.get_versionstamp()
                    t.commit().wait()
                    stamps.append(bytes(future.wait()).hex())
                reply(stamps=stamps)
            elif op == "increments":
                for _ in range(cmd["n"]):
                    increment(db, k)
                reply()
            elif op == "exit":
                db.close()
                reply()
                return
            else:
                reply(failure="unknown op %r" % op)
        except FDBError as error:
            tr = db.create_transaction()
            reply(code=error.code)


main()
"""


class Worker:
    """A child process with its own EmbeddedDatabase on `path`, driven by JSON lines over pipes."""

    def __init__(self, script: Path, path: str, log: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
        self._log_path = log
        self._log = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(script), path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=str(REPO_ROOT),
            env=env,
        )
        self._replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.receive().get("ready")

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._replies.put(json.loads(line))
        self._replies.put(None)

    def send(self, op: str, **fields: Any) -> None:
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()

    def receive(self) -> dict:
        try:
            reply = self._replies.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"worker did not answer within {WAIT}s; stderr: {self.stderr()}") from None
        if reply is None:
            raise AssertionError(f"worker exited; stderr: {self.stderr()}")
        assert "failure" not in reply, reply
        return reply

    def call(self, op: str, **fields: Any) -> dict:
        self.send(op, **fields)
        return self.receive()

    def stderr(self) -> str:
        self._log.flush()
        return self._log_path.read_text()[-3000:]

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no cleanup code runs in the child
        self.proc.wait(WAIT)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("exit")
                self.proc.wait(WAIT)
            except Exception:
                self.proc.kill()
                self.proc.wait(WAIT)
        self._log.close()


@pytest.fixture
def spawn(tmp_path):
    """spawn(path) -> a Worker process on that SQLite path; all are stopped afterwards."""
    script = tmp_path / "engine_worker.py"
    script.write_text(WORKER_SCRIPT)
    workers: list[Worker] = []

    def factory(path: str) -> Worker:
        worker = Worker(script, path, tmp_path / f"worker-{len(workers)}.log")
        workers.append(worker)
        return worker

    yield factory
    for worker in workers:
        worker.close()


def test_commit_survives_kill_9_of_the_writer_and_uncommitted_writes_do_not(spawn, tmp_path, open_db):
    """A commit that returned survives SIGKILL of its process; that process's uncommitted writes vanish."""
    path = str(tmp_path / "store.sqlite3")
    writer = spawn(path)
    writer.call("set", key=key("committed").hex(), value=b"yes".hex())
    writer.call("commit")  # the reply is sent only after commit().wait() returned
    writer.call("set", key=key("pending").hex(), value=b"no".hex())
    assert writer.call("get", key=key("pending").hex())["value"] == b"no".hex()
    writer.kill()
    database = open_db()
    assert database[key("committed")] == b"yes"
    assert database[key("pending")] is None
    database[key("after")] = b"writable"  # the killed process left no lock behind
    assert database[key("after")] == b"writable"


def test_process_sees_commits_of_another_process(spawn, tmp_path, open_db):
    """A commit in one process is visible to new transactions in another."""
    path = str(tmp_path / "store.sqlite3")
    database = open_db()
    child = spawn(path)
    database[key("from-parent")] = b"p"
    assert child.call("get", key=key("from-parent").hex())["value"] == b"p".hex()
    child.call("set", key=key("from-child").hex(), value=b"c".hex())
    child.call("commit")
    assert database[key("from-child")] == b"c"


def test_processes_plain_read_then_concurrent_write_conflicts(spawn, tmp_path, open_db):
    """Process A reads, process B writes and commits, A writes and commits: 1020."""
    path = str(tmp_path / "store.sqlite3")
    open_db()[key("a")] = b"0"
    a, b = spawn(path), spawn(path)
    assert a.call("get", key=key("a").hex())["value"] == b"0".hex()
    b.call("set", key=key("a").hex(), value=b"1".hex())
    assert "code" not in b.call("commit")
    a.call("set", key=key("marker").hex(), value=b"a".hex())
    assert a.call("commit").get("code") == NOT_COMMITTED
    database = open_db()
    assert database[key("a")] == b"1"
    assert database[key("marker")] is None


def test_processes_snapshot_read_does_not_conflict(spawn, tmp_path, open_db):
    """The same cross-process interleaving with a snapshot read: both commit."""
    path = str(tmp_path / "store.sqlite3")
    open_db()[key("a")] = b"0"
    a, b = spawn(path), spawn(path)
    assert a.call("snapshot_get", key=key("a").hex())["value"] == b"0".hex()
    b.call("set", key=key("a").hex(), value=b"1".hex())
    assert "code" not in b.call("commit")
    a.call("set", key=key("marker").hex(), value=b"a".hex())
    assert "code" not in a.call("commit")
    assert open_db()[key("marker")] == b"a"


def test_parent_transaction_conflicts_with_a_child_process_commit(spawn, tmp_path, embedded_db):
    """A transaction in this process fails with 1020 when another process overwrote what it read."""
    embedded_db[key("a")] = b"0"
    child = spawn(str(tmp_path / "store.sqlite3"))
    tr = embedded_db.create_transaction()
    assert tr[key("a")] == b"0"
    child.call("set", key=key("a").hex(), value=b"1".hex())
    assert "code" not in child.call("commit")
    tr[key("b")] = b"x"
    assert commit_outcome(tr) == NOT_COMMITTED


def test_versionstamps_increase_in_commit_order_across_processes(spawn, tmp_path, embedded_db):
    """Alternating commits in two processes and this one get strictly increasing stamps."""
    log = SPACE["log"]
    a, b = spawn(str(tmp_path / "store.sqlite3")), spawn(str(tmp_path / "store.sqlite3"))
    in_order: list[bytes] = []
    for round_ in range(3):
        for worker in (a, b):
            reply = worker.call("stamps", key=log.key().hex(), n=1, tag="w")
            assert "stamps" in reply, reply
            (stamp,) = reply["stamps"]
            in_order.append(bytes.fromhex(stamp))
        tr = embedded_db.create_transaction()
        tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"parent")
        future = tr.get_versionstamp()
        tr.commit().wait()
        in_order.append(bytes(future.wait()))
    assert len(set(in_order)) == len(in_order) == 9
    assert in_order == sorted(in_order)


def test_concurrent_processes_get_unique_versionstamps(spawn, tmp_path, embedded_db):
    """Two processes committing versionstamped keys at once: all stamps unique, each process's increasing."""
    log = SPACE["log"]
    a, b = spawn(str(tmp_path / "store.sqlite3")), spawn(str(tmp_path / "store.sqlite3"))
    a.send("stamps", key=log.key().hex(), n=15, tag="a")
    b.send("stamps", key=log.key().hex(), n=15, tag="b")
    reply_a, reply_b = a.receive(), b.receive()
    assert "stamps" in reply_a and "stamps" in reply_b, (reply_a, reply_b)
    stamps_a = [bytes.fromhex(s) for s in reply_a["stamps"]]
    stamps_b = [bytes.fromhex(s) for s in reply_b["stamps"]]
    assert stamps_a == sorted(stamps_a)
    assert stamps_b == sorted(stamps_b)
    assert len(set(stamps_a) | set(stamps_b)) == 30
    tr = embedded_db.create_transaction()
    rows = list(tr.get_range(log.range().start, log.range().stop))
    assert sorted(log.unpack(kv.key)[0].tr_version for kv in rows) == sorted(stamps_a + stamps_b)


def test_concurrent_processes_increments_are_serializable(spawn, tmp_path, embedded_db):
    """Two processes and this one increment one counter read-modify-write: no lost update."""
    per_worker = 15
    counter = key("counter")
    a, b = spawn(str(tmp_path / "store.sqlite3")), spawn(str(tmp_path / "store.sqlite3"))

    @transactional
    def increment(tr) -> None:
        value = tr[counter]
        tr[counter] = le64((from_le64(value) if value.present() else 0) + 1)

    a.send("increments", key=counter.hex(), n=per_worker)
    b.send("increments", key=counter.hex(), n=per_worker)
    for _ in range(per_worker):
        increment(embedded_db)
    replies = [a.receive(), b.receive()]
    assert all("code" not in reply for reply in replies), replies
    assert from_le64(embedded_db[counter]) == 3 * per_worker


def test_range_iteration_cannot_outlive_its_transactions_snapshot(embedded_db):
    """A range iterator resumed after its transaction committed fails (1025) instead of reading another snapshot.

    Both for the rows read when get_range was called and for those past that first batch.
    """
    count = FIRST_BATCH_ROWS + 3
    tr = embedded_db.create_transaction()
    for index in range(count):
        tr[key("r%04d" % index)] = b"v"
    tr.commit().wait()
    tr = embedded_db.create_transaction()
    rows = iter(tr.get_range(key("r"), key("s")))
    assert next(rows).key == key("r0000")
    tr[key("other")] = b"x"
    tr.commit().wait()
    served = 1
    with pytest.raises(FDBError) as info:
        for _row in rows:
            served += 1
    assert info.value.code == 1025
    assert served == 1


# --------------------------------------------------------------------------- watches


def _ready_soon(future: Any) -> bool:
    ready = threading.Event()
    future.on_ready(lambda _f: ready.set())
    return ready.wait(WAIT)


def test_watch_sees_a_commit_made_by_another_process(open_db):
    """Commits from other processes reach watches through the watcher's polling."""
    database = open_db("shared.sqlite3")
    database[key("w")] = b"0"
    tr = database.create_transaction()
    watch = tr.watch(key("w"))
    tr.commit().wait()
    _set_w_from_another_process(database)
    assert _ready_soon(watch), "a commit from another process never reached the watch"


def _set_w_from_another_process(database: Any) -> None:
    """Commit key("w") = b"1" from a separate Python process sharing the store file."""
    script = (
        "import sys; from django_fdbqueue.engines.embedded import EmbeddedDatabase; "
        "from django_fdbqueue.fdbapi import fdb; "
        "db = EmbeddedDatabase(sys.argv[1]); db[fdb.Subspace(('embedded-test',)).pack(('w',))] = b'1'"
    )
    subprocess.run([sys.executable, "-c", script, database.path], cwd=REPO_ROOT, check=True, timeout=WAIT)


def test_another_process_commit_wakes_a_watch_through_the_shared_signal(open_db):
    """With the store-version poll slowed to a minute, only the shared commit signal can deliver
    another process's commit in time: the watch must still fire (typically within milliseconds)."""
    database = open_db("signalled.sqlite3", watch_poll_interval=60.0)
    database[key("w")] = b"0"
    tr = database.create_transaction()
    watch = tr.watch(key("w"))
    tr.commit().wait()
    _set_w_from_another_process(database)
    assert _ready_soon(watch), "the shared commit signal did not wake the watch"


def test_a_store_made_by_the_previous_schema_opens_and_keeps_its_data(tmp_path):
    """Schema 1 kept a row per write range; opening it moves to schema 2 and keeps every key."""
    import sqlite3

    path = str(tmp_path / "old.sqlite3")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        """
        PRAGMA journal_mode=WAL;
        CREATE TABLE kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE write_ranges (version INTEGER NOT NULL, committed_at REAL NOT NULL,
                                   begin BLOB NOT NULL, "end" BLOB NOT NULL);
        INSERT INTO meta VALUES ('version', 5), ('pruned_through', 0);
        INSERT INTO write_ranges VALUES (5, 0.0, X'00', X'01');
        """
    )
    conn.execute("INSERT INTO kv VALUES (?, ?)", (key("kept"), b"yes"))
    conn.close()
    database = EmbeddedDatabase(path)
    try:
        assert database[key("kept")] == b"yes"
        database[key("new")] = b"written"
        assert database[key("new")] == b"written"
    finally:
        database.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (4,)
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "write_ranges" not in tables and "commit_ranges" in tables
    conn.close()


def test_a_schema_2_store_keeps_its_version_when_it_moves_to_the_history_table(tmp_path):
    """Schema 2 kept the version in meta; schema 3 keeps it in the newest history row. Versions
    must keep growing across the move (a read version must never go back), and the old row goes,
    so that a running process of the older release fails at commit instead of reading a frozen version."""
    import sqlite3

    path = str(tmp_path / "v2.sqlite3")
    ahead = 4_000_000_000_000_000  # far beyond the clock: the next version must still be larger
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        f"""
        PRAGMA journal_mode=WAL;
        PRAGMA user_version = 2;
        CREATE TABLE kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE commit_ranges (version INTEGER PRIMARY KEY, committed_at REAL NOT NULL,
                                    ranges BLOB NOT NULL);
        INSERT INTO meta VALUES ('version', {ahead}), ('pruned_through', 0);
        """
    )
    conn.execute("INSERT INTO kv VALUES (?, ?)", (key("kept"), b"yes"))
    conn.close()
    database = EmbeddedDatabase(path)
    try:
        tr = database.create_transaction()
        assert tr.get_read_version().wait() == ahead
        assert tr[key("kept")] == b"yes"
        tr[key("new")] = b"written"
        tr.commit().wait()
        assert tr.get_committed_version() > ahead
    finally:
        database.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (4,)
    assert ("version",) not in conn.execute("SELECT name FROM meta").fetchall()
    conn.close()


def test_writing_the_same_value_does_not_fire_a_watch(embedded_db):
    """Watches compare values: rewriting the watched value is no change (checked deterministically)."""
    embedded_db[key("same")] = b"v"
    tr = embedded_db.create_transaction()
    watch = tr.watch(key("same"))
    tr.commit().wait()
    embedded_db[key("same")] = b"v"
    embedded_db._watcher.check_now()
    assert not watch.is_ready()
    embedded_db[key("same")] = b"w"
    embedded_db._watcher.check_now()
    assert watch.is_ready()


def test_watch_of_a_reset_transaction_is_cancelled(embedded_db):
    """Resetting (or retrying) the transaction ends its uncommitted watches with 1025."""
    tr = embedded_db.create_transaction()
    watch = tr.watch(key("r"))
    tr.reset()
    expect_error(1025, watch.wait)


def test_too_many_watches_fail_with_1032(embedded_db):
    """Past the per-database limit, new watches fail with too_many_watches."""
    embedded_db._watcher.limit = 2
    futures = []
    for index in range(3):
        tr = embedded_db.create_transaction()
        futures.append(tr.watch(key("many", index)))
        tr.commit().wait()
    assert not futures[0].is_ready() and not futures[1].is_ready()
    expect_error(1032, futures[2].wait)


def test_closing_the_database_cancels_waiting_watches(open_db):
    """close() ends every waiting watch with 1101 instead of leaving waiters hanging."""
    database = open_db("closing.sqlite3")
    tr = database.create_transaction()
    watch = tr.watch(key("c"))
    tr.commit().wait()
    database.close()
    expect_error(1101, watch.wait)


def test_get_and_watch_and_set_and_watch(embedded_db):
    """The database shortcuts return the value (or nothing) and a live watch."""
    assert embedded_db.set_and_watch(key("s"), b"1") is not None
    value, watch = embedded_db.get_and_watch(key("s"))
    assert value == b"1"
    embedded_db[key("s")] = b"2"
    assert _ready_soon(watch)


def test_a_range_read_started_before_commit_cannot_run_after_it(embedded_db):
    """get_range starts its read at once (as the binding's does): iterating after commit is 1025."""
    embedded_db[key("late")] = b"v"
    tr = embedded_db.create_transaction()
    rows = tr.get_range(key("late"), key("lateZ"))
    tr[key("other")] = b"x"
    tr.commit().wait()
    expect_error(1025, lambda: list(rows))


def test_a_store_locked_past_the_busy_timeout_is_a_timeout_not_a_crash(open_db, monkeypatch):
    """Another process holding SQLite's write lock too long surfaces as FDBError 1031."""
    import sqlite3

    from django_fdbqueue.engines.embedded import storage

    monkeypatch.setattr(storage, "BUSY_TIMEOUT", 0.05)
    database = open_db("locked.sqlite3")
    holder = sqlite3.connect(database.path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        tr = database.create_transaction()
        tr[key("x")] = b"1"
        expect_error(TRANSACTION_TIMED_OUT, lambda: tr.commit().wait())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    database[key("x")] = b"2"  # the store works again once the lock is gone
    assert database[key("x")] == b"2"


def test_the_wal_stays_bounded_while_threads_keep_snapshots_open(open_db):
    """Several threads always have some snapshot open; checkpoints must still restart the WAL.

    Without restarts the WAL grows by about 12 KB a commit here (70 MB for these 6,000); with a
    restart every CHECKPOINT_EVERY commits it stays near one interval's worth.
    """
    database = open_db("busy.sqlite3")

    def work(index: int) -> None:
        for _ in range(2_000):
            tr = database.create_transaction()
            tr[key("t%d" % index)].wait()
            tr[key("t%d" % index)] = b"x" * 200
            tr.commit().wait()

    threads = [threading.Thread(target=work, args=(index,), daemon=True) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 4)
    assert not any(thread.is_alive() for thread in threads)
    assert os.path.getsize(database.path + "-wal") < 40 * 2**20


def test_finished_watches_stop_waking_the_watcher(embedded_db):
    """A cancelled or fired watch is forgotten at the next commit, so commits stop waking the thread."""
    tr = embedded_db.create_transaction()
    watch = tr.watch(key("w"))
    tr.commit().wait()
    watch.cancel()
    embedded_db[key("other")] = b"x"
    assert embedded_db._watcher._watches == []


# -- what the binding tester's runs left out (docs/explanation/embedded-engine.md) -------------------


def _past_triggers(database: EmbeddedDatabase) -> set[str]:
    conn = database._storage.acquire()
    try:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    finally:
        database._storage.release(conn)


def test_commits_keep_what_they_replace_only_once_a_version_was_handed_out(embedded_db):
    """Reading the past costs nothing until a client is handed a version: only then do commits
    keep what they replace, and once none was handed out for a while the triggers go again."""
    embedded_db[b"k"] = b"1"
    assert _past_triggers(embedded_db) == set()
    tr = embedded_db.create_transaction()
    tr.get(b"k").wait()  # a read version taken, not handed out
    assert _past_triggers(embedded_db) == set()
    version = tr.get_read_version().wait()
    assert _past_triggers(embedded_db) == {"kv_keep_inserted", "kv_keep_updated", "kv_keep_deleted"}
    embedded_db[b"k"] = b"2"
    past = embedded_db.create_transaction()
    past.set_read_version(version)
    assert past[b"k"] == b"1"
    storage = embedded_db._storage
    conn = storage.acquire()
    try:  # as if the last version was handed out long ago
        conn.execute("UPDATE meta SET value = 1 WHERE name = 'keep_past_until'")
    finally:
        storage.release(conn)
    storage._keeping_until = -1
    storage._next_prune = 0.0
    embedded_db[b"k"] = b"3"
    assert _past_triggers(embedded_db) == set()


def test_an_older_version_no_client_was_handed_refuses_keys_changed_since(embedded_db):
    """At a version known otherwise (here a versionstamp's), while commits keep nothing, a key no
    commit changed since reads as it was (it is the same), a changed one fails with 1007
    (transaction_too_old), as a cluster does once that version's data is gone; a commit checks
    conflicts from that version."""
    embedded_db[b"same"] = b"1"
    tr = embedded_db.create_transaction()
    tr[b"changed"] = b"old"
    stamp = tr.get_versionstamp()
    tr.commit().wait()
    version = struct.unpack(">Q", stamp.wait()[:8])[0]
    embedded_db[b"changed"] = b"new"
    assert _past_triggers(embedded_db) == set()
    tr = embedded_db.create_transaction()
    tr.set_read_version(version)
    assert tr[b"same"] == b"1"
    with pytest.raises(FDBError) as raised:
        tr.get(b"changed").wait()
    assert raised.value.code == 1007
    with pytest.raises(FDBError) as raised:
        list(tr.get_range(b"a", b"z"))
    assert raised.value.code == 1007
    tr.add_read_conflict_key(b"changed")
    tr[b"out"] = b"x"
    with pytest.raises(FDBError) as raised:
        tr.commit().wait()
    assert raised.value.code == 1020


def test_a_read_at_an_older_version_across_processes(embedded_db):
    """The version handed out in one process, the changes committed by another: read as it was."""
    embedded_db[key("k")] = b"old"
    version = embedded_db.create_transaction().get_read_version().wait()
    script = (
        "import sys; from django_fdbqueue.engines.embedded import EmbeddedDatabase;"
        "db = EmbeddedDatabase(sys.argv[1]); db[bytes.fromhex(sys.argv[2])] = b'new';"
        "del db[bytes.fromhex(sys.argv[3])]; db.close()"
    )
    embedded_db[key("gone")] = b"here"
    arguments = [embedded_db.path, key("k").hex(), key("gone").hex()]
    subprocess.run([sys.executable, "-c", script, *arguments], cwd=REPO_ROOT, check=True, timeout=WAIT)
    tr = embedded_db.create_transaction()
    tr.set_read_version(version)
    assert tr[key("k")] == b"old"
    assert not tr[key("gone")].present()  # written after the version, by this process
    assert [bytes(kv.value) for kv in tr.get_range(SPACE.range().start, SPACE.range().stop)] == [b"old"]


def test_tenants_are_refused_as_by_a_cluster_without_them(embedded_db):
    from django_fdbqueue.fdbapi import FDBError

    with pytest.raises(FDBError) as raised:
        embedded_db.open_tenant(b"tenant")
    assert raised.value.code == 2136
