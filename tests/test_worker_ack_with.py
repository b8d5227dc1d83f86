"""A handler's writes committed with its item's ack (``AckWith``), and alone when no ack comes."""

from __future__ import annotations

import threading

import pytest

from django_fdbqueue import service
from django_fdbqueue.connection import root_subspace
from django_fdbqueue.exceptions import LeaseNotFound
from django_fdbqueue.fdbapi import is_transaction
from django_fdbqueue.worker import ack_with as ack_with_module
from django_fdbqueue.worker.ack_with import AckWith
from tests.test_worker import DEADLINE, queue, wait_until, worker_factory  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(120)


def _marker(item_value: str) -> bytes:
    return root_subspace()["ack-with-test"].pack((item_value,))


def _handler(outcomes: list[bool], step_error: Exception | None = None, gate: threading.Event | None = None):
    """A handler that records its item as done, in a step to commit with the ack."""

    def handler(item):
        if gate is not None:
            assert gate.wait(DEADLINE)

        def step(tr):
            if step_error is not None:
                raise step_error
            tr[_marker(item.value)] = b"done"

        return AckWith(step, outcomes.append)

    return handler


def test_the_writes_commit_in_the_ack_s_transaction(fdbqueue_db, queue, worker_factory, monkeypatch):
    service.push(fdbqueue_db, queue, "one")
    joined = []
    real_ack = service.ack

    def ack(db_or_tr, receipt, *, name=None):
        # The ack joins the step's transaction: it sees the step's write before anything commits.
        joined.append(is_transaction(db_or_tr) and db_or_tr[_marker("one")] == b"done")
        return real_ack(db_or_tr, receipt, name=name)

    monkeypatch.setattr(ack_with_module.service, "ack", ack)
    outcomes: list[bool] = []
    worker = worker_factory(queue, _handler(outcomes), lease=10)
    worker.start()
    wait_until(lambda: worker.stats.processed == 1)
    worker.stop()
    assert worker.wait(DEADLINE)
    assert joined == [True] and outcomes == [True]
    assert fdbqueue_db[_marker("one")] == b"done"
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.size, info.leased) == (0, 0)


def test_the_writes_of_an_item_whose_lease_was_lost_commit_alone(fdbqueue_db, queue, worker_factory, monkeypatch):
    """No ack (the lease is someone else's now), but the handler did its work: its writes stay."""
    service.push(fdbqueue_db, queue, "contested")
    gate = threading.Event()

    def extend(*args, **kwargs):
        raise LeaseNotFound()

    monkeypatch.setattr(service, "extend", extend)
    outcomes: list[bool] = []
    worker = worker_factory(queue, _handler(outcomes, gate=gate), lease=0.6)
    worker.start()
    wait_until(lambda: worker.stats.lost == 1)
    worker.stop()
    gate.set()
    assert worker.wait(DEADLINE)
    assert worker.stats.processed == 0 and outcomes == [True]
    assert fdbqueue_db[_marker("contested")] == b"done"
    again = service.claim(fdbqueue_db, queue, lease=5, wait=5)  # not acked: delivered again
    assert again is not None and again.item.value == "contested"


def test_writes_that_fail_leave_the_item_unacknowledged(fdbqueue_db, queue, worker_factory, caplog):
    service.push(fdbqueue_db, queue, "broken")
    outcomes: list[bool] = []
    worker = worker_factory(queue, _handler(outcomes, step_error=RuntimeError("no room")), lease=1)
    worker.start()
    wait_until(lambda: outcomes)
    worker.stop()
    assert worker.wait(DEADLINE)
    assert outcomes[0] is False and worker.stats.processed == 0
    assert "Could not commit the writes of item" in caplog.text
    assert fdbqueue_db[_marker("broken")] is None
    again = service.claim(fdbqueue_db, queue, lease=5, wait=5)  # its lease runs out: it comes back
    assert again is not None and again.item.value == "broken"


def test_a_step_must_be_callable():
    with pytest.raises(TypeError, match="callable step"):
        AckWith("not a function")


@pytest.mark.parametrize("conflicts", [2, ack_with_module.CONFLICT_RETRIES + 1])
def test_a_conflict_is_retried_in_place_a_few_times(fdbqueue_db, queue, conflicts):
    """Steps that meet on purpose (a workflow's members counting toward one callback) conflict
    as part of their work: the ack retries a conflict itself, then leaves it to the worker."""
    from django_fdbqueue.fdbapi import ErrorCode, FDBError

    service.push(fdbqueue_db, queue, "job")
    lease = service.claim(fdbqueue_db, queue, lease=60)
    runs = []

    def step(tr):
        runs.append(1)
        tr[_marker("job")] = b"done"
        if len(runs) <= conflicts:
            # Another transaction writes a key this one read: its commit conflicts (1020).
            tr[_marker("read")].present()
            fdbqueue_db[_marker("read")] = str(len(runs)).encode()

    if conflicts > ack_with_module.CONFLICT_RETRIES:
        with pytest.raises(FDBError) as caught:
            ack_with_module.ack_with(fdbqueue_db, lease.receipt, queue, AckWith(step))
        assert caught.value.code == ErrorCode.NOT_COMMITTED
        assert len(runs) == ack_with_module.CONFLICT_RETRIES + 1
        assert service.get_item(fdbqueue_db, queue, lease.item.id) is not None  # not acked
        return
    ack_with_module.ack_with(fdbqueue_db, lease.receipt, queue, AckWith(step))
    assert len(runs) == conflicts + 1
    assert fdbqueue_db[_marker("job")] == b"done"
    assert service.get_item(fdbqueue_db, queue, lease.item.id) is None  # acked
