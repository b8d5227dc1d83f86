"""Writes that commit with a claim: ``claim(..., step=)``, the worker's ``on_claim``, and a task
marked RUNNING in the transaction that claims its item."""

from __future__ import annotations

import threading
import time
import types

import pytest

from django_fdbqueue import service
from django_fdbqueue.connection import root_subspace
from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import FDBError, is_transaction, transactional
from django_fdbqueue.tasks import results
from django_fdbqueue.tasks import runner as task_runner
from django_fdbqueue.worker import Worker
from django_fdbqueue.worker import heartbeat as worker_heartbeat
from django_fdbqueue.worker import settling as worker_settling
from django_fdbqueue.worker import slots as worker_slots
from django_fdbqueue.worker import state as worker_state
from tests.test_tasks import backend, workers  # noqa: F401 - fixtures
from tests.test_worker import DEADLINE, queue, wait_until, worker_factory  # noqa: F401 - fixtures

from . import task_functions as tf

pytestmark = pytest.mark.timeout(120)

NOT_COMMITTED = 1020


def _marker(value: str) -> bytes:
    return root_subspace()["claim-step-test"].pack((value,))


@transactional
def _read(tr, key: bytes) -> bytes | None:
    value = tr[key]
    return bytes(value) if value.present() else None


@transactional
def _write(tr, key: bytes, value: bytes) -> None:
    tr[key] = value


def _marking_step(calls: list):
    """A step that records the item it ran for, in the claim's transaction, and returns a label."""

    def step(tr, lease):
        calls.append((is_transaction(tr), lease.item.value))
        tr[_marker(lease.item.value)] = b"claimed"
        return f"step for {lease.item.value}"

    return step


# --- service.claim(step=) -----------------------------------------------------------------------


def test_the_step_s_writes_commit_with_the_claim(fdbqueue_db, queue):
    service.push(fdbqueue_db, queue, "one")
    calls: list = []
    lease = service.claim(fdbqueue_db, queue, lease=30, step=_marking_step(calls))
    assert calls == [(True, "one")]
    assert isinstance(lease, service.SteppedLease) and lease.step_result == "step for one"
    assert _read(fdbqueue_db, _marker("one")) == b"claimed"
    assert service.get_queue(fdbqueue_db, queue).leased == 1


def test_without_a_step_the_lease_is_a_plain_lease(fdbqueue_db, queue):
    service.push(fdbqueue_db, queue, "one")
    assert type(service.claim(fdbqueue_db, queue, lease=30)) is service.Lease


def test_no_item_no_step(fdbqueue_db, queue):
    calls: list = []
    assert service.claim(fdbqueue_db, queue, lease=30, step=_marking_step(calls)) is None
    assert calls == []


def test_a_step_that_raises_fails_the_claim_and_nothing_commits(fdbqueue_db, queue):
    service.push(fdbqueue_db, queue, "one")

    def step(tr, lease):
        tr[_marker("one")] = b"half-done"
        raise ValueError("the step failed")

    with pytest.raises(ValueError, match="the step failed"):
        service.claim(fdbqueue_db, queue, lease=30, step=step)
    assert _read(fdbqueue_db, _marker("one")) is None
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.size, info.leased) == (1, 0)
    assert service.claim(fdbqueue_db, queue, lease=30).item.attempts == 1  # that claim was never counted


def test_a_retried_claim_runs_its_step_again_and_keeps_the_committed_result(fdbqueue_db, queue):
    service.push(fdbqueue_db, queue, "one")
    runs: list[int] = []

    def step(tr, lease):
        runs.append(len(runs) + 1)
        if len(runs) == 1:
            raise FDBError(NOT_COMMITTED)  # as a conflict at commit would: the transaction retries
        return runs[-1]

    lease = service.claim(fdbqueue_db, queue, lease=30, step=step)
    assert runs == [1, 2] and lease.step_result == 2
    assert service.get_queue(fdbqueue_db, queue).leased == 1


def test_a_step_that_is_not_callable_is_refused(fdbqueue_db, queue):
    service.push(fdbqueue_db, queue, "one")
    with pytest.raises(InvalidArgument, match="step must be callable"):
        service.claim(fdbqueue_db, queue, lease=30, step="mark it")
    assert service.get_queue(fdbqueue_db, queue).size == 1


# --- Worker(on_claim=) --------------------------------------------------------------------------


def test_the_worker_s_on_claim_result_reaches_the_handler(fdbqueue_db, queue, worker_factory):
    for value in ("one", "two"):
        service.push(fdbqueue_db, queue, value)
    calls: list = []
    handled: list = []
    worker = worker_factory(
        queue, lambda item, claimed: handled.append((item.value, claimed)), on_claim=_marking_step(calls)
    )
    worker.start()
    wait_until(lambda: worker.stats.processed == 2)
    worker.stop()
    assert worker.wait(DEADLINE)
    assert calls == [(True, "one"), (True, "two")]
    assert handled == [("one", "step for one"), ("two", "step for two")]
    assert _read(fdbqueue_db, _marker("two")) == b"claimed"


def test_a_worker_refuses_an_on_claim_that_is_not_callable(fdbqueue_db, queue, worker_factory):
    with pytest.raises(InvalidArgument, match="on_claim must be callable"):
        worker_factory(queue, lambda item, claimed: None, on_claim=42)


def _claimed_and_extended(db, worker: Worker) -> worker_state.Held:
    """An item as a slot holds it after its claim, once the heartbeat extended its lease (as it does
    when the extend falls due before the slot calls the handler)."""
    lease = service.claim(db, worker.queue, lease=worker.lease, step=worker.on_claim)
    held = worker_state.Held(lease, time.monotonic(), worker.lease)
    heartbeat, _ = worker._roles()
    heartbeat.extend(held)
    assert held.lease is not lease and not held.lost  # the extend's own lease replaced the claim's
    return held


def test_an_extend_before_the_handler_keeps_what_on_claim_returned(fdbqueue_db, queue):
    """Issue 28: the extend's plain Lease dropped ``step_result``, so calling the handler raised
    AttributeError, the item counted as failed and an attempt was spent."""
    service.push(fdbqueue_db, queue, "one")
    handled: list = []
    worker = Worker(
        fdbqueue_db, queue, lambda item, claimed: handled.append((item.value, claimed)), on_claim=_marking_step([])
    )
    held = _claimed_and_extended(fdbqueue_db, worker)
    _, slots = worker._roles()
    slots[0].handle(held)
    assert handled == [("one", "step for one")]
    assert (worker.stats.processed, worker.stats.failed) == (1, 0)
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.size, info.leased, info.delayed) == (0, 0, 0)  # acknowledged


def test_the_heartbeat_is_timed_from_when_the_claim_returned(fdbqueue_db, queue, worker_factory, monkeypatch):
    """Issue 28: the first extend was timed from before the claim's wait for an item, so after a
    long wait it was due at once. The worker's clock here jumps 100 s inside the claim, as if
    the claim had waited that long."""
    jumped = [0.0]
    clock = types.SimpleNamespace(monotonic=lambda: time.monotonic() + jumped[0], sleep=time.sleep)
    for module in (worker_slots, worker_heartbeat, worker_settling):
        monkeypatch.setattr(module, "time", clock)
    step_ran_at: list[float] = []
    first_extend_due: list[float] = []

    class RecordingHeld(worker_state.Held):
        __slots__ = ()

        def __init__(self, *args) -> None:
            super().__init__(*args)
            first_extend_due.append(self.next_extend)

    monkeypatch.setattr(worker_slots, "Held", RecordingHeld)

    def on_claim(tr, lease):
        jumped[0] += 100.0
        step_ran_at.append(clock.monotonic())  # the claim returns after this

    service.push(fdbqueue_db, queue, "one")
    handled = threading.Event()
    worker = worker_factory(queue, lambda item, claimed: handled.set(), on_claim=on_claim, lease=30)
    worker.start()
    assert handled.wait(DEADLINE)
    worker.stop()
    assert worker.wait(DEADLINE)
    assert first_extend_due[0] >= step_ran_at[-1] + 30 * worker_state.HEARTBEAT_FRACTION


# --- tasks: RUNNING in the claim's transaction ----------------------------------------------------


def test_a_task_is_marked_running_in_its_claim_not_in_a_transaction_of_its_own(workers, monkeypatch):
    seen_running: list = []
    real_mark = task_runner._mark_running

    def mark_running(tr, result_id, worker_id, now_us):
        assert is_transaction(tr)  # the claim's own transaction, passed through
        seen_running.append(result_id)
        return real_mark(tr, result_id, worker_id, now_us)

    def no_own_transaction(*args, **kwargs):
        raise AssertionError("the worker marked a task RUNNING in a transaction of its own")

    monkeypatch.setattr(task_runner, "_mark_running", mark_running)
    monkeypatch.setattr(task_runner, "_start", no_own_transaction)
    result = tf.add.enqueue(2, 3)
    group = workers()
    wait_until(lambda: group.stats.processed == 1)
    result.refresh()
    assert str(result.status) == "SUCCESSFUL" and result.return_value == 5
    assert seen_running == [result.id]
    assert result.worker_ids == [group.worker_id]


@pytest.mark.django_db  # TaskRunner closes Django's old connections, in this thread here
def test_a_task_whose_lease_is_extended_before_it_runs_runs_once(fdbqueue_db, backend):
    """Issue 28: the task ran not at all (AttributeError), spent an attempt and stayed RUNNING."""
    result = tf.add.enqueue(2, 3)
    runner = task_runner.TaskRunner(backend, "test-worker")
    worker = Worker(fdbqueue_db, backend.queue_for("default"), runner.handle, on_claim=runner.claimed, end="max")
    held = _claimed_and_extended(fdbqueue_db, worker)
    _, slots = worker._roles()
    slots[0].handle(held)
    result.refresh()
    assert str(result.status) == "SUCCESSFUL" and result.return_value == 5 and result.attempts == 1
    assert (worker.stats.processed, worker.stats.failed) == (1, 0)


def test_a_result_that_cannot_be_marked_running_fails_the_item_not_the_claim(fdbqueue_db, workers, caplog):
    result = tf.add.enqueue(2, 3)
    _write(fdbqueue_db, results.record_key(result.id), b"{not json")  # a record nothing can read
    group = workers()
    queue_name = group.workers[0].queue

    def released() -> bool:  # the handler failed, and the item is back (delayed), not lost
        info = service.get_queue(fdbqueue_db, queue_name)
        return group.stats.failed >= 1 and info.leased == 0 and info.delayed + info.size + info.dead == 1

    wait_until(released)
    assert group.stats.store_errors == 0
    assert "Claim on queue" not in caplog.text  # the claim itself went through
