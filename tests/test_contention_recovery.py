"""High-contention pops when attempts fail or poppers vanish (issue 17): retries, receipts, put-backs.

Every test runs per engine through `fdbqueue_db`. A real cluster cannot be told to fail a commit
or a read, so the failures these tests need come from :class:`Scripted`, a database wrapper that
makes chosen commits report 1021 *after* committing and chosen reads fail at ``present()`` (where
a cluster's lazy futures raise): the same script on both engines. One test also drives the
embedded engine's own fault injector, as the issue asks, and runs on that engine only. Time never
passes for real: deadlines and dedup windows move with a clock that runs ahead, and threads meet
at events with bounded waits.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pytest

from django_fdbqueue import connection, service
from django_fdbqueue.exceptions import QueueNotFound
from django_fdbqueue.fdbapi import ErrorCode, fdb, make_error, retry_counts, transactional
from django_fdbqueue.service._internals import contention, dedup, recovery
from django_fdbqueue.service._internals.catalog import require
from django_fdbqueue.service._internals.keys import ItemMeta
from django_fdbqueue.service.extension import runtime
from tests.clock import Clock
from tests.test_service_contention import (
    committed_round,
    fill,
    force_staging,
    hc_pop,
    new_pop,
    register,
    settled,
    staging_keys,
)

#: How long a woken pop may take to return on a loaded machine; far below how long it would wait.
PROMPT_SECONDS = 8.0


# --- helpers ---------------------------------------------------------------------------------


def reopen(settings, **options: Any) -> Any:
    """The app's database handle reopened with these FDBQUEUE options (as a deployment sets them)."""
    settings.FDBQUEUE = {**settings.FDBQUEUE, **options}
    connection.reset_database()
    return connection.get_database()


class _Then:
    """A commit future that, once the commit really succeeded, reports the script's error anyway.

    A commit that really failed (a conflict) raises its own error and leaves the script as it
    was, for the next attempt.
    """

    def __init__(self, future: Any, script: "Scripted") -> None:
        self.future, self.script = future, script

    def wait(self) -> None:
        self.future.wait()
        code = self.script.commit_failure()
        if code is not None:
            raise make_error(code)


class _FailingRead:
    """A read whose value cannot be had: it raises where a cluster's lazy future would."""

    def __init__(self, code: int) -> None:
        self.code = code

    def present(self) -> bool:
        raise make_error(self.code)

    wait = present


class _ScriptedTransaction:
    """A real transaction of either engine, except where the script says otherwise."""

    def __init__(self, tr: Any, script: "Scripted") -> None:
        self._tr, self._script = tr, script

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tr, name)

    def __getitem__(self, key: Any) -> Any:
        got = self._tr[key]
        code = self._script.read_failure(key) if isinstance(key, bytes) else None
        return got if code is None else _FailingRead(code)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._tr[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._tr[key]

    def commit(self) -> Any:
        return _Then(self._tr.commit(), self._script)


class Scripted:
    """The app's database with failures scripted in order, the same way on both engines.

    ``applied_then(code)``: the next commit that succeeds raises ``code`` (say 1021: the commit
    happened, the client cannot tell). ``fail_read(prefix, code)``: the next ordinary read of a
    key under ``prefix`` raises ``code`` from ``present()``.
    """

    def __init__(self, db: Any) -> None:
        self.db = db
        self._commits: deque[int] = deque()
        self._reads: deque[tuple[bytes, int]] = deque()
        self.raised: list[int] = []
        self._lock = threading.Lock()

    def create_transaction(self) -> _ScriptedTransaction:
        return _ScriptedTransaction(self.db.create_transaction(), self)

    def applied_then(self, code: int) -> None:
        self._commits.append(code)

    def fail_read(self, prefix: bytes, code: int) -> None:
        self._reads.append((prefix, code))

    def commit_failure(self) -> int | None:
        with self._lock:
            return self._take(self._commits.popleft()) if self._commits else None

    def read_failure(self, key: bytes) -> int | None:
        with self._lock:
            if self._reads and key.startswith(self._reads[0][0]):
                return self._take(self._reads.popleft()[1])
        return None

    def _take(self, code: int) -> int:
        self.raised.append(code)
        return code

    @property
    def done(self) -> bool:
        return not self._commits and not self._reads


@transactional
def queue_keys(tr, name: str):
    return require(tr, name)[1]


@transactional
def dedup_state(tr, name: str) -> tuple[dict[str, int], list[str]]:
    """Each dedup key's kept_until (0: alive), and the keys with an expiry entry."""
    qk = queue_keys(tr, name)
    records = {}
    r = qk.dedup_records.range()
    for kv in tr.get_range(r.start, r.stop):
        records[qk.dedup_records.unpack(bytes(kv.key))[0]] = fdb.tuple.unpack(bytes(kv.value))[3]
    r = qk.dedup_expiry.range()
    expiring = [qk.dedup_expiry.unpack(bytes(kv.key))[1] for kv in tr.get_range(r.start, r.stop)]
    return records, expiring


@transactional
def wake_value(tr, name: str) -> bytes | None:
    raw = tr[queue_keys(tr, name).wake_key]
    return bytes(raw) if raw.present() else None


class Background:
    """Run a call in a thread; keep what it returned or raised for the test thread."""

    def __init__(self, call) -> None:
        self.outcome: list[Any] = []
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call) -> None:
        try:
            self.outcome.append(call())
        except BaseException as error:  # handed to the test thread
            self.outcome.append(error)

    def finished_within(self, seconds: float) -> bool:
        self.thread.join(seconds)
        return not self.thread.is_alive()


def unknown_retries() -> int:
    return retry_counts().get(ErrorCode.COMMIT_UNKNOWN_RESULT, 0)


def serve_a_ghost(db, name: str, seconds: float = 1.0) -> contention._Pop:
    """A popper registers, a round hands it the first item, and it vanishes without collecting."""
    ghost = new_pop(name, seconds=seconds)
    register(db, ghost)
    assert committed_round(db, name).served == 1
    return ghost


def recover(db, name: str, clock: Clock, ghost_seconds: float = 1.0) -> None:
    """Let the ghost's deadline and the grace pass, and run the round that puts its item back."""
    clock.advance(ghost_seconds + contention.GRACE_SECONDS + 0.1)
    assert committed_round(db, name).restored == 1


# --- 1: one failed attempt is one retry --------------------------------------------------------


@pytest.mark.parametrize("limit", [1, None])
def test_one_unknown_result_is_one_retry_injected(fdbqueue_db, faults, settings, limit):
    """The embedded engine's injector: one `unknown_applied` at the pop's commit, RETRY_LIMIT 1 (or none).

    The retry reads the receipt and returns the item the first attempt took; the retries
    counter moves by one. (Before the fix the error went through on_error twice: with limit 1
    the pop raised 1021 and the item it had taken was lost; without a limit it counted 2.)
    """
    db = reopen(settings, RETRY_LIMIT=limit)
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 3)
    db.faults.fail_next("unknown_applied")
    before = unknown_retries()
    try:
        assert hc_pop(db, "q").id == ids[0]
    finally:
        db.faults.disable()
    assert unknown_retries() - before == 1
    info = service.get_queue(db, "q")
    assert (info.size, info.popped) == (2, 1)
    assert hc_pop(db, "q").id == ids[1]


@pytest.mark.parametrize("limit", [1, None])
def test_one_unknown_result_is_one_retry(fdbqueue_db, engine_name, settings, limit):
    """The same on both engines: the pop's commit applies, then reports 1021.

    With RETRY_LIMIT 1 any second error would fail the pop. (Catalog changes elsewhere on a
    shared cluster no longer conflict with it: the metadata version is read as a snapshot.)
    """
    db = reopen(settings, RETRY_LIMIT=limit)
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 3)
    scripted = Scripted(db)
    scripted.applied_then(ErrorCode.COMMIT_UNKNOWN_RESULT)
    before = unknown_retries()
    assert contention.pop(scripted, "q").id == ids[0]
    assert scripted.raised == [ErrorCode.COMMIT_UNKNOWN_RESULT]
    assert unknown_retries() - before == 1
    info = service.get_queue(db, "q")
    assert (info.size, info.popped) == (2, 1)


# --- 5: the receipt read fails after a 1021 ---------------------------------------------------


@pytest.mark.parametrize("code", [ErrorCode.NOT_COMMITTED, ErrorCode.TRANSACTION_TOO_OLD])
def test_a_failed_receipt_read_keeps_the_item_in_doubt(fdbqueue_db, code):
    """Attempt 1 takes the first item and reports 1021; attempt 2's receipt read raises `code`.

    Attempt 3 must still know what attempt 1 took, read the receipt and return that item
    (before the fix the candidates were dropped before the read, so attempt 3 popped the next
    item and the first was lost).
    """
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 3)
    scripted = Scripted(fdbqueue_db)
    scripted.applied_then(ErrorCode.COMMIT_UNKNOWN_RESULT)
    scripted.fail_read(queue_keys(fdbqueue_db, "q").receipts.key(), code)
    assert contention.pop(scripted, "q").id == ids[0]
    assert scripted.done and scripted.raised == [ErrorCode.COMMIT_UNKNOWN_RESULT, code]
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.popped) == (2, 1)
    assert [item.id for item in service.browse(fdbqueue_db, "q").items] == ids[1:]


# --- 3: dedup keys of items handed to a vanished popper --------------------------------------


def test_an_item_put_back_by_recovery_keeps_its_dedup_key(fdbqueue_db, clock):
    """Served to a popper that vanished, put back: a push of its key long after is still a duplicate."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    first = service.push(fdbqueue_db, "q", "v1", dedup_key="k")
    serve_a_ghost(fdbqueue_db, "q")
    recover(fdbqueue_db, "q", clock)
    assert dedup_state(fdbqueue_db, "q") == ({"k": 0}, [])
    clock.advance(dedup.DEDUP_WINDOW_SECONDS + 1)
    again = service.push(fdbqueue_db, "q", "v2", dedup_key="k")
    assert again.duplicate and again.id == first.id
    assert [item.id for item in service.browse(fdbqueue_db, "q").items] == [first.id]


def test_an_uncollected_result_keeps_its_dedup_key(fdbqueue_db, clock):
    """A result waits for its owner like a leased item: its key is held until it is collected."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    first = service.push(fdbqueue_db, "q", "v1", dedup_key="k")
    seconds = dedup.DEDUP_WINDOW_SECONDS * 2  # a pop timeout longer than the dedup window
    owner = serve_a_ghost(fdbqueue_db, "q", seconds=seconds)
    clock.advance(dedup.DEDUP_WINDOW_SECONDS + 1)
    assert service.push(fdbqueue_db, "q", "v2", dedup_key="k").id == first.id
    assert service.size(fdbqueue_db, "q") == 0
    assert settled(fdbqueue_db, owner).id == first.id
    records, expiring = dedup_state(fdbqueue_db, "q")
    assert records["k"] > 0 and expiring == ["k"]  # collected: consumed now, kept for the window
    assert service.push(fdbqueue_db, "q", "v3", dedup_key="k").duplicate
    assert service.size(fdbqueue_db, "q") == 0


def test_a_second_result_put_back_by_its_owner_keeps_its_dedup_key(fdbqueue_db, clock):
    """The protocol never gives one pop two results; if it did, the second goes back, still deduplicated."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    a = service.push(fdbqueue_db, "q", "a", dedup_key="ka")
    b = service.push(fdbqueue_db, "q", "b", dedup_key="kb")
    p = new_pop("q")
    register(fdbqueue_db, p)
    register(fdbqueue_db, p)  # two requests with one token: two results for one owner
    assert committed_round(fdbqueue_db, "q").served == 2
    woken = wake_value(fdbqueue_db, "q")
    assert settled(fdbqueue_db, p).id == a.id
    assert wake_value(fdbqueue_db, "q") != woken  # 4: blocking pops learn that b is back
    assert [item.id for item in service.browse(fdbqueue_db, "q").items] == [b.id]
    records, expiring = dedup_state(fdbqueue_db, "q")
    assert records["kb"] == 0 and expiring == ["ka"]
    clock.advance(dedup.DEDUP_WINDOW_SECONDS + 1)
    assert service.push(fdbqueue_db, "q", "b2", dedup_key="kb").id == b.id
    assert service.size(fdbqueue_db, "q") == 1


def test_recovery_revives_a_consumed_dedup_record(fdbqueue_db, clock):
    """A result whose record says "consumed" (as rounds wrote them before): put back, it is alive again."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    first = service.push(fdbqueue_db, "q", "v1", dedup_key="k")
    serve_a_ghost(fdbqueue_db, "q")

    @transactional
    def consume(tr):
        qk = queue_keys(tr, "q")
        result, _bell = tr.get_range(qk.results.range().start, qk.results.range().stop)  # the item, the bell
        priority, stamp, *rest = qk.results.unpack(bytes(result.key))[3:]
        dedup.consumed(tr, qk, priority, stamp, ItemMeta.from_elements(rest))

    consume(fdbqueue_db)
    records, expiring = dedup_state(fdbqueue_db, "q")
    assert records["k"] > 0 and expiring == ["k"]
    recover(fdbqueue_db, "q", clock)
    assert dedup_state(fdbqueue_db, "q") == ({"k": 0}, [])
    clock.advance(dedup.DEDUP_WINDOW_SECONDS + 1)
    assert service.push(fdbqueue_db, "q", "v2", dedup_key="k").id == first.id


def test_recovery_leaves_a_record_that_names_another_item(fdbqueue_db, clock):
    """The key was forgotten and pushed again while the item was away: the newer item keeps it."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    old = service.push(fdbqueue_db, "q", "old", dedup_key="k")
    serve_a_ghost(fdbqueue_db, "q")

    @transactional
    def forget(tr):
        qk = queue_keys(tr, "q")
        dedup.forget_all(tr, qk)

    forget(fdbqueue_db)
    new = service.push(fdbqueue_db, "q", "new", dedup_key="k")
    recover(fdbqueue_db, "q", clock)
    assert [item.id for item in service.browse(fdbqueue_db, "q").items] == [old.id, new.id]
    assert service.push(fdbqueue_db, "q", "again", dedup_key="k").id == new.id


# --- 4: recovery wakes blocking pops ---------------------------------------------------------


def test_recovery_touches_the_wake_up_key(fdbqueue_db, clock):
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    fill(fdbqueue_db, "q", "fifo", 1)
    serve_a_ghost(fdbqueue_db, "q")
    woken = wake_value(fdbqueue_db, "q")
    recover(fdbqueue_db, "q", clock)
    assert wake_value(fdbqueue_db, "q") != woken


@pytest.mark.parametrize("mode", ["plain", "high-contention"])
def test_a_blocking_pop_is_woken_by_recovery(fdbqueue_db, settings, clock, monkeypatch, mode):
    """A pop waiting on an empty queue returns the recovered item at once, not after its wait.

    TIMEOUT is off so that the waiter's watch lasts (a watch ending at the transaction timeout
    would re-check the queue and hide the missing wake-up).
    """
    db = reopen(settings, TIMEOUT=None)
    service.create_queue(db, "q", kind="fifo")
    (item_id,) = fill(db, "q", "fifo", 1)
    serve_a_ghost(db, "q")
    watching = threading.Event()
    real_wait_on = runtime.wait_on

    def wait_on(watch, seconds):
        watching.set()  # the watch is set (its transaction committed): the pop sleeps now
        return real_wait_on(watch, seconds)

    monkeypatch.setattr(runtime, "wait_on", wait_on)
    popper = Background(lambda: service.pop(db, "q", mode=mode, wait=service.MAX_WAIT_SECONDS))
    try:
        assert watching.wait(PROMPT_SECONDS), f"the pop never started waiting: {popper.outcome}"
        recover(db, "q", clock)
        assert popper.finished_within(PROMPT_SECONDS), "the blocking pop was not woken by the recovery"
        (got,) = popper.outcome
        assert got is not None and got.id == item_id
    finally:
        popper.finished_within(service.MAX_WAIT_SECONDS + PROMPT_SECONDS)


# --- a queue deleted under a waiting pop ------------------------------------------------------


@pytest.mark.parametrize("recreate", [False, True])
def test_a_waiting_pop_reports_its_queue_deleted(fdbqueue_db, monkeypatch, recreate):
    """Rounds are switched off so the pop keeps waiting; the queue goes: QueueNotFound, promptly."""
    force_staging(monkeypatch)
    monkeypatch.setattr(contention, "_fulfil", lambda db, name, end, p, lead=False: contention.Round())
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    registered = threading.Event()
    real_settle = contention._settle

    def settle(db, p, *, withdraw):
        registered.set()
        return real_settle(db, p, withdraw=withdraw)

    monkeypatch.setattr(contention, "_settle", settle)
    popper = Background(lambda: hc_pop(fdbqueue_db, "q", timeout=60))
    try:
        assert registered.wait(PROMPT_SECONDS), f"the pop never registered: {popper.outcome}"
        service.delete_queue(fdbqueue_db, "q")
        if recreate:
            service.create_queue(fdbqueue_db, "q", kind="fifo")
            fill(fdbqueue_db, "q", "fifo", 1)
        assert popper.finished_within(PROMPT_SECONDS), "the pop kept waiting on a deleted queue"
        (got,) = popper.outcome
        assert isinstance(got, QueueNotFound)
    finally:
        popper.finished_within(60 + PROMPT_SECONDS)
    if recreate:
        assert service.size(fdbqueue_db, "q") == 1
        assert staging_keys(fdbqueue_db, "q")["min"] == []


# --- 5: a full batch of expired answers asks for another round --------------------------------


def test_a_recovery_batch_of_empty_answers_says_there_may_be_more(fdbqueue_db, clock, monkeypatch):
    """Found by the simulation with a small batch: "empty" answers fill the recovery's batch
    without putting an item back, and the round said nothing more had expired (before the fix
    it compared the items put back with the batch), so a maintenance loop stopped early."""
    monkeypatch.setattr(recovery, "RECOVER_BATCH", 1)
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    for _ in range(2):  # two pops answered "empty" (no items), who never collect
        register(fdbqueue_db, new_pop("q", seconds=1.0))
    assert committed_round(fdbqueue_db, "q").answered_empty == 2
    clock.advance(1.0 + contention.GRACE_SECONDS + 0.1)
    expired = len(result_keys(fdbqueue_db, "q"))
    assert expired >= 2
    rounds = [committed_round(fdbqueue_db, "q") for _ in range(expired + 1)]
    assert [(r.restored, r.more) for r in rounds] == [(0, True)] * expired + [(0, False)]
    assert result_keys(fdbqueue_db, "q") == []


@transactional
def result_keys(tr, name: str) -> list[bytes]:
    _entry, qk = require(tr, name)
    return [bytes(kv.key) for kv in tr.get_range(qk.results.range().start, qk.results.range().stop)]
