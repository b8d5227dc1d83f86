"""Workflows: chains, groups, chords and DAGs of tasks, each callback run exactly once.

Every test runs per engine through ``fdbqueue_db`` (those injecting faults on the embedded
engine only). Workers are the backend's own (``TaskWorkers``), or ``TaskRunner.handle`` with
``ack_with`` where a test must choose the moment of each commit.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.utils import timezone

from django_fdbqueue import service
from django_fdbqueue.fdbapi import ErrorCode, FDBError, transactional
from django_fdbqueue.tasks import runner as task_runner
from django_fdbqueue.tasks.compat import InvalidTaskError, TaskResultStatus
from django_fdbqueue.tasks.exceptions import WorkflowCancelled, WorkflowDoesNotExist, WorkflowFailed
from django_fdbqueue.tasks.runner import TaskWorkers, backend_named
from django_fdbqueue.tasks.workflows import (
    Workflow,
    call,
    cancel_workflow,
    chain,
    chord,
    get_workflow,
    group,
    list_workflows,
)
from django_fdbqueue.tasks.workflows.keys import Keys, count_of
from django_fdbqueue.worker.ack_with import ack_with, commit_alone

from . import task_functions as tf
from . import workflow_tasks as wt

DEADLINE = 60
QUEUE = "tasks.default"


@pytest.fixture
def backend(fdbqueue_db):
    return backend_named("default")


def run_burst(backend, concurrency: int = 2, deadline: float = DEADLINE, spread: int | None = None) -> TaskWorkers:
    """Run the task queues' workers until nothing is ready and nothing runs."""
    group_ = TaskWorkers(backend, burst=True, concurrency=concurrency, spread=spread)
    group_.start()
    try:
        assert group_.wait(deadline), "the burst did not end"
    finally:
        group_.abort()
        group_.wait(DEADLINE)
    return group_


def wait_until(condition, what: str, seconds: float = DEADLINE) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def lines(path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


# --- shapes ---------------------------------------------------------------------------------------


def test_a_chain_runs_in_order_one_step_at_a_time(fdbqueue_db, backend, tmp_path):
    log = tmp_path / "order"
    handle = chain(*(call(wt.touch, str(log), label) for label in "abcd")).enqueue()
    assert (handle.status, handle.size) == ("RUNNING", 4)
    assert service.size(fdbqueue_db, QUEUE) == 1  # only the first step is pushed
    run_burst(backend, concurrency=4)
    assert lines(log) == ["a", "b", "c", "d"]
    handle.refresh()
    assert (handle.status, handle.succeeded, handle.failed) == ("SUCCESSFUL", 4, 0)
    assert handle.finished_at is not None and handle.is_finished
    assert [handle.result(i).return_value for i in range(4)] == list("abcd")


class CountedCommits:
    """Counts the commits that wrote something (a read-only commit has version -1), every thread."""

    def __init__(self, db) -> None:
        self.kind = type(db.create_transaction())
        self.written = 0
        self._lock = threading.Lock()

    def __enter__(self) -> "CountedCommits":
        real = self.real = self.kind.commit

        def commit(tr):
            future = real(tr)
            try:
                future.wait()
            except Exception:  # noqa: BLE001 - its caller waits on it and sees the error
                return future
            if tr.get_committed_version() >= 0:
                with self._lock:
                    self.written += 1
            return future

        self.kind.commit = commit
        return self

    def __exit__(self, *exc) -> None:
        self.kind.commit = self.real


@pytest.mark.django_db  # TaskRunner closes Django's old connections, in this thread here
def test_a_chain_link_adds_no_commit_beyond_its_task_s_own(fdbqueue_db, backend):
    """Under 1 commit per link (0 by design): a link's successor is released inside its
    predecessor's ack, so a chain costs what as many independent tasks cost."""
    links = 12
    for n in range(links):
        wt.double.enqueue(n)
    with CountedCommits(fdbqueue_db) as independent:
        run_burst(backend, concurrency=1)
    handle = chain(*(call(wt.double, n) for n in range(links))).enqueue()
    with CountedCommits(fdbqueue_db) as chained:
        run_burst(backend, concurrency=1)
    handle.refresh()
    assert handle.status == "SUCCESSFUL" and handle.succeeded == links
    print(f"commits: {independent.written} for {links} tasks, {chained.written} for a chain of {links}")
    assert independent.written >= 2 * links  # each task's start and its ack, at least: counted
    # By design a link adds nothing; a release in a commit of its own would add one per link.
    assert chained.written - independent.written <= links // 4


def test_a_group_runs_all_its_members(fdbqueue_db, backend):
    handle = group(*(call(wt.double, n) for n in range(6))).enqueue()
    assert service.size(fdbqueue_db, QUEUE) == 6
    run_burst(backend, concurrency=3)
    handle.refresh()
    assert handle.status == "SUCCESSFUL" and handle.succeeded == 6
    assert [handle.result(i).return_value for i in range(6)] == [0, 2, 4, 6, 8, 10]


def test_a_chord_callback_runs_once_with_the_results_in_member_order(fdbqueue_db, backend, tmp_path):
    log = tmp_path / "callback-runs"
    members = [call(wt.double, n) for n in range(20)]
    handle = chord(members, call(wt.collect, str(log), page_size=3)).enqueue()  # pages of 3: 7 reads
    run_burst(backend, concurrency=4)
    handle.refresh()
    assert handle.status == "SUCCESSFUL"
    callback = handle.result(20)
    assert callback.return_value == [2 * n for n in range(20)]
    assert callback.attempts == 1 and len(lines(log)) == 1


def test_a_diamond_waits_for_both_branches(fdbqueue_db, backend, tmp_path):
    log = tmp_path / "order"
    wf = Workflow()
    top = wf.add(call(wt.touch, str(log), "top"))
    left = wf.add(call(wt.double, 1), after=[top])
    right = wf.add(call(wt.touch, str(log), "right"), after=[top])
    bottom = wf.add(call(wt.collect), after=[right, left])  # the order given is the order read
    handle = wf.enqueue()
    assert bottom.result_id == handle.result(bottom).id
    run_burst(backend, concurrency=3)
    assert lines(log) == ["top", "right"]
    assert handle.result(bottom).return_value == ["right", 2]
    assert handle.predecessors(bottom) == [2, 1]
    handle.refresh()
    assert handle.status == "SUCCESSFUL"


def test_chains_groups_and_chords_nest(fdbqueue_db, backend):
    nested = chain(
        call(wt.double, 1),
        chord(group(call(wt.double, 2), chain(call(wt.double, 3), call(wt.double, 4))), call(wt.collect)),
        call(wt.collect),
    )
    handle = nested.enqueue()
    assert handle.size == 6
    run_burst(backend)
    assert handle.result(4).return_value == [4, 8]  # the group's ends: double(2), then double(4)
    assert handle.result(5).return_value == [[4, 8]]
    handle.refresh()
    assert handle.status == "SUCCESSFUL"


# --- failures -------------------------------------------------------------------------------------


def _error_class(result) -> str:
    return result.errors[-1].exception_class_path


def test_on_failure_fail_stops_the_workflow_and_marks_what_never_ran(fdbqueue_db, backend, tmp_path):
    log = tmp_path / "ran"
    slow_start, slow_go, bad_go = tmp_path / "started", tmp_path / "go", tmp_path / "fail-now"
    wf = Workflow()  # on_failure="fail" is the default
    slow = wf.add(call(wt.wait_for, str(slow_go), str(slow_start)))  # running when the failure comes
    after_slow = wf.add(call(wt.touch, str(log), "after-slow"), after=[slow])
    gate = wf.add(call(wt.wait_for, str(bad_go)))
    bad = wf.add(call(wt.explode, "boom"), after=[gate])
    after_bad = wf.add(call(wt.touch, str(log), "after-bad"), after=[bad])
    handle = wf.enqueue()
    workers = TaskWorkers(backend, concurrency=2)
    workers.start()
    try:
        wait_until(slow_start.exists, "the slow member to start")
        bad_go.touch()
        wait_until(lambda: get_workflow(handle.id).status == "FAILED", "the failure")
        slow_go.touch()
        wait_until(lambda: handle.result(slow).status == TaskResultStatus.SUCCESSFUL, "the slow member")
        wait_until(lambda: get_workflow(handle.id).swept, "the members that will not run to be marked")
    finally:
        workers.abort()
        workers.wait(DEADLINE)
    handle.refresh()
    assert handle.status == "FAILED"
    assert handle.reason == {"node": bad.index, "result_id": bad.result_id, "task_path": wt.explode.module_path}
    assert lines(log) == []  # neither successor ran: the slow one's finish released nothing
    for node in (after_bad, after_slow):
        never = handle.result(node)
        assert never.status == TaskResultStatus.FAILED and never.attempts == 0
        assert _error_class(never) == f"{WorkflowFailed.__module__}.WorkflowFailed"
        assert "failed (on_failure='fail') when member 3" in never.errors[-1].traceback
    states = {info.index: info.state for info in handle.nodes()}
    assert states == {0: "SUCCESSFUL", 1: "CANCELLED", 2: "SUCCESSFUL", 3: "FAILED", 4: "CANCELLED"}
    assert (handle.succeeded, handle.failed, handle.cancelled) == (2, 1, 2)
    assert service.size(fdbqueue_db, QUEUE) == 0


def test_a_member_s_retry_runs_it_alone_and_releases_nothing(fdbqueue_db, backend, tmp_path):
    """Tasks have no automatic retries: backend.retry(id) runs a FAILED member again on its own.
    Its workflow's outcome was settled at its first finish; a member that never ran is refused."""
    log = tmp_path / "ran"
    handle = chain(call(tf.fail, "first"), call(wt.touch, str(log), "next")).enqueue()
    run_burst(backend)
    handle.refresh()
    assert handle.status == "FAILED"
    with pytest.raises(InvalidTaskError, match="never ran: it is a member of workflow"):
        backend.retry(handle.result(1).id)
    again = backend.retry(handle.result(0).id)
    assert again.status == TaskResultStatus.READY
    run_burst(backend)
    retried = handle.result(0)
    assert retried.status == TaskResultStatus.FAILED and retried.attempts == 2  # it did run again
    assert lines(log) == [] and handle.result(1).attempts == 0
    handle.refresh()
    assert (handle.status, handle.failed) == ("FAILED", 1)  # counted once


def test_on_failure_continue_runs_the_callback_with_the_error_in_place(fdbqueue_db, backend):
    members = [call(wt.double, 1), call(wt.explode, "member 1"), call(wt.double, 3)]
    handle = chord(members, call(wt.collect)).enqueue(on_failure="continue")
    run_burst(backend)
    assert handle.result(3).return_value == [2, "error:builtins.ValueError", 6]
    handle.refresh()
    # Every member ran; one failed, so the workflow as a whole is FAILED (its callback SUCCESSFUL).
    assert (handle.status, handle.succeeded, handle.failed, handle.on_failure) == ("FAILED", 3, 1, "continue")
    assert handle.reason == {"failed": 1}


def test_on_failure_continue_counts_a_failure_in_the_last_finish_too(fdbqueue_db, backend):
    """The finish that ends the workflow reads the failures counted so far, its own included."""
    handle = chain(call(wt.double, 1), call(wt.explode, "last")).enqueue(on_failure="continue")
    run_burst(backend)
    handle.refresh()
    assert (handle.status, handle.succeeded, handle.failed, handle.reason) == ("FAILED", 1, 1, {"failed": 1})


# --- cancelling -------------------------------------------------------------------------------------


def test_cancel_lets_a_running_member_finish_and_runs_nothing_more(fdbqueue_db, backend, tmp_path):
    started, go, log = tmp_path / "started", tmp_path / "go", tmp_path / "ran"
    wf = Workflow()
    first = wf.add(call(wt.wait_for, str(go), str(started)))
    second = wf.add(call(wt.touch, str(log), "second"), after=[first])
    pushed = wf.add(call(wt.touch, str(log), "pushed"), after=[])  # a root nobody claims in time
    handle = wf.enqueue()
    workers = TaskWorkers(backend, ["default"], concurrency=1)
    workers.start()
    try:
        wait_until(started.exists, "the first member to start")
        cancelled = cancel_workflow(handle.id)
        assert cancelled.status == "CANCELLED" and cancelled.swept
        go.touch()
        wait_until(lambda: handle.result(first).is_finished, "the running member")
        wait_until(lambda: service.size(fdbqueue_db, QUEUE) == 0, "the pushed member's item to be dropped")
    finally:
        workers.abort()
        workers.wait(DEADLINE)
    assert handle.result(first).status == TaskResultStatus.SUCCESSFUL  # its result is recorded
    assert lines(log) == []
    for node in (second, pushed):
        assert _error_class(handle.result(node)) == f"{WorkflowCancelled.__module__}.WorkflowCancelled"
    handle.refresh()
    assert (handle.status, handle.succeeded, handle.cancelled) == ("CANCELLED", 1, 2)
    assert cancel_workflow(handle.id).status == "CANCELLED"  # again: nothing changes
    with pytest.raises(WorkflowDoesNotExist):
        cancel_workflow("no-such-workflow")


def test_a_pushed_member_of_a_stopped_workflow_is_dropped_at_claim(fdbqueue_db, backend, tmp_path):
    """Without the sweep (a worker died before it): the claim's transaction itself refuses it."""
    from django_fdbqueue.tasks.workflows import headers

    log = tmp_path / "ran"
    handle = group(call(wt.touch, str(log), "a"), call(wt.touch, str(log), "b")).enqueue()
    header = headers.get(fdbqueue_db, handle.id)

    @transactional
    def stop(tr):
        headers.finish(tr, headers.read(tr, handle.id), "CANCELLED", {"cancelled": True})

    stop(fdbqueue_db)
    assert header.status == "RUNNING" and get_workflow(handle.id).swept is False
    assert {info.state for info in handle.nodes()} == {"CANCELLED"}  # shown as it will be
    run_burst(backend)
    assert lines(log) == []
    assert all(_error_class(handle.result(i)).endswith("WorkflowCancelled") for i in range(2))
    assert cancel_workflow(handle.id).swept  # finishes the marking


def test_an_item_pushed_by_hand_does_not_run_a_member_early(fdbqueue_db, backend, tmp_path, caplog):
    """Anyone allowed to push to a task queue could name a waiting member: it is dropped unrun,
    and the member runs once its predecessors have finished, once."""
    log, go = tmp_path / "order", tmp_path / "go"
    handle = chain(call(wt.wait_for, str(go)), call(wt.touch, str(log), "second")).enqueue()
    service.push(fdbqueue_db, QUEUE, {"result_id": handle.result(1).id}, priority=10)  # ahead of the first
    workers = TaskWorkers(backend, concurrency=1)
    workers.start()
    try:
        wait_until(lambda: "waits on nodes not finished yet" in caplog.text, "the stray item to be dropped")
        assert lines(log) == [] and handle.result(1).status == TaskResultStatus.READY
        go.touch()
        wait_until(lambda: get_workflow(handle.id).is_finished, "the workflow")
    finally:
        workers.abort()
        workers.wait(DEADLINE)
    assert lines(log) == ["second"] and handle.result(1).attempts == 1


# --- faults -----------------------------------------------------------------------------------------


def _claim_and_run(db, runner):
    """Claim the next task and run it (marked RUNNING in its own transaction): (lease, its writes)."""
    lease = service.claim(db, QUEUE, lease=60, end="max")
    assert lease is not None
    return lease, runner.handle(lease.item)


@pytest.mark.django_db  # TaskRunner closes Django's old connections, in this thread here
@pytest.mark.parametrize("shape", ["chain", "chord"])
def test_a_lost_answer_at_a_member_s_finish_releases_once(fdbqueue_db, backend, faults, shape):
    """1021 on the ack that stores the last member's result, after it applied: the worker's
    retries (the ack again, then the writes alone) must not release the successor twice."""
    if shape == "chain":
        handle = chain(call(wt.double, 1), call(wt.collect)).enqueue()
    else:
        handle = chord([call(wt.double, n) for n in range(3)], call(wt.collect)).enqueue()
    runner = task_runner.TaskRunner(backend, "test-worker")
    leases = [_claim_and_run(fdbqueue_db, runner) for _ in range(handle.size - 1)]
    for lease, writes in leases[:-1]:
        ack_with(fdbqueue_db, lease.receipt, QUEUE, writes)
    lease, writes = leases[-1]
    faults.fail_next("unknown_applied")
    with pytest.raises(FDBError) as lost:
        ack_with(fdbqueue_db, lease.receipt, QUEUE, writes)
    assert lost.value.code == ErrorCode.COMMIT_UNKNOWN_RESULT
    with pytest.raises(Exception, match="(?i)lease"):  # the ack had applied: the lease is gone
        ack_with(fdbqueue_db, lease.receipt, QUEUE, writes)
    commit_alone(fdbqueue_db, writes)  # and the writes alone, as for an ack that did not apply
    assert service.size(fdbqueue_db, QUEUE) == 1  # the callback's item, once
    run_burst(backend)
    handle.refresh()
    assert handle.status == "SUCCESSFUL" and handle.result(handle.size - 1).attempts == 1
    assert handle.succeeded == handle.size


def test_a_member_whose_worker_died_runs_again_and_the_callback_runs_once(fdbqueue_db, backend, tmp_path):
    log = tmp_path / "callback-runs"
    handle = chord([call(wt.double, n) for n in range(3)], call(wt.collect, str(log))).enqueue()
    lease = service.claim(fdbqueue_db, QUEUE, lease=1, end="max")  # a worker takes one member...
    task_runner._start(fdbqueue_db, lease.item.value["result_id"], "doomed-worker")  # ...and dies
    workers = TaskWorkers(backend, concurrency=2)
    workers.start()
    try:
        wait_until(lambda: get_workflow(handle.id).is_finished, "the workflow to finish")
    finally:
        workers.abort()
        workers.wait(DEADLINE)
    handle.refresh()
    assert handle.status == "SUCCESSFUL"
    retried = backend.get_result(lease.item.value["result_id"])
    assert retried.attempts == 2 and retried.worker_ids[0] == "doomed-worker"
    assert handle.result(3).return_value == [0, 2, 4] and len(lines(log)) == 1


@pytest.mark.django_db  # TaskRunner closes Django's old connections, in these threads
def test_members_finishing_together_release_the_callback_once(fdbqueue_db, backend):
    """64 members (8 shards of 8) whose acks all start at one barrier, from 8 threads."""
    size, threads = 64, 8
    handle = chord([call(wt.double, n) for n in range(size)], call(wt.total)).enqueue()
    runner = task_runner.TaskRunner(backend, "test-worker")
    leases = [_claim_and_run(fdbqueue_db, runner) for _ in range(size)]
    barrier, conflicts, errors = threading.Barrier(threads), [], []

    def settle(mine) -> None:
        try:
            barrier.wait(DEADLINE)
            for lease, writes in mine:
                while True:  # the worker's own retry of a conflicting ack (settling.Settler)
                    try:
                        ack_with(fdbqueue_db, lease.receipt, QUEUE, writes)
                        break
                    except FDBError as error:
                        assert error.code == ErrorCode.NOT_COMMITTED, error
                        conflicts.append(1)
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            errors.append(error)

    running = [threading.Thread(target=settle, args=(leases[n::threads],)) for n in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(DEADLINE)
    assert errors == []
    assert service.size(fdbqueue_db, QUEUE) == 1  # the callback, once
    space = Keys(handle.id)

    @transactional
    def counters(tr):
        shards = [count_of(tr[space.shard(size, shard)]) for shard in range(8)]
        return shards, count_of(tr[space.shards_done(size)])

    assert counters(fdbqueue_db) == ([8] * 8, 8)
    run_burst(backend)
    assert handle.result(size).return_value == sum(2 * n for n in range(size))
    handle.refresh()
    assert handle.status == "SUCCESSFUL"


@pytest.mark.django_db  # TaskRunner closes Django's old connections, in this thread here
def test_members_of_different_shards_never_conflict(fdbqueue_db, backend):
    """9 members: 3 shards of 3 (positions 0, 3, 6 in shard 0...). Two finishes in one shard
    conflict; two in different shards both commit, however they overlap."""
    handle = chord([call(wt.double, n) for n in range(9)], call(wt.total)).enqueue()
    runner = task_runner.TaskRunner(backend, "test-worker")
    writes = {}
    for _ in range(9):
        lease, settle = _claim_and_run(fdbqueue_db, runner)
        writes[_node_of(handle, lease)] = settle

    def together(first: int, second: int) -> list[int | None]:
        """Both finishes read before either commits; each one's error code (None: committed)."""
        trs = [fdbqueue_db.create_transaction() for _ in range(2)]
        for tr, node in zip(trs, (first, second)):
            writes[node].step(tr)
        codes = []
        for tr in trs:
            try:
                tr.commit().wait()
                codes.append(None)
            except FDBError as error:
                codes.append(error.code)
        return codes

    assert together(0, 1) == [None, None]  # shards 0 and 1
    assert together(3, 6) == [None, ErrorCode.NOT_COMMITTED]  # both in shard 0
    assert together(2, 4) == [None, None]  # shards 2 and 1
    for node in (6, 5, 7, 8):  # the rest, one at a time (6 again: its conflicting commit applied nothing)
        tr = fdbqueue_db.create_transaction()
        writes[node].step(tr)
        tr.commit().wait()
    assert service.size(fdbqueue_db, QUEUE) == 1  # the callback's item (the members' are still leased)
    assert handle.result(9).status == TaskResultStatus.READY


def _node_of(handle, lease) -> int:
    result_id = lease.item.value["result_id"]
    return next(info.index for info in handle.nodes() if info.result_id == result_id)


# --- validation: refused before anything is stored --------------------------------------------------


def _dummy_backend_path() -> str:
    try:
        import django.tasks  # noqa: F401

        return "django.tasks.backends.dummy.DummyBackend"
    except ImportError:
        return "django_tasks.backends.dummy.DummyBackend"


def _nothing_stored(db) -> None:
    assert not service.queue_exists(db, QUEUE)
    assert all(not list_workflows(status).items for status in ("STORING", "RUNNING"))


def test_bad_steps_and_graphs_are_refused_with_clear_messages(fdbqueue_db, backend):
    from django_fdbqueue.tasks.exceptions import ArgumentsTooLarge, InvalidWorkflow

    with pytest.raises(
        InvalidWorkflow, match=r"call\(\) takes a task .*not the function len \(is it decorated with @task\?\)"
    ):
        call(len, 1)
    with pytest.raises(TypeError, match=r"tests.task_functions.add: Task arguments must be JSON"):
        call(tf.add, object(), 1)
    for empty in (group, chain):
        with pytest.raises(InvalidWorkflow, match=rf"{empty.__name__}\(\) needs at least one step"):
            empty()
    with pytest.raises(InvalidWorkflow, match="needs at least one step"):
        chord([], call(wt.collect))
    with pytest.raises(InvalidWorkflow, match=r"part 1 is the Task tests.task_functions.add, not a step \(wrap"):
        chain(call(tf.add, 1, 2), tf.add)
    empty = Workflow()
    with pytest.raises(InvalidWorkflow, match="A workflow needs at least one step"):
        empty.enqueue()
    empty.add(call(tf.add, 1, 2))  # refused as it was: it may still be completed
    with pytest.raises(InvalidWorkflow, match="on_failure must be 'fail' or 'continue'"):
        Workflow(on_failure="ignore")
    with pytest.raises(ArgumentsTooLarge, match=r"Step 0 \(tests.task_functions.add\): Task arguments are too large"):
        Workflow().add(call(tf.add, "x" * 100_000, "y"))
    wf = Workflow()
    wf.add(call(tf.add, 1, 2))
    with pytest.raises(InvalidWorkflow, match=r"Step 1 \(tests.task_functions.add\): run_after is over 366 days"):
        wf.add(call(tf.add.using(run_after=timezone.now() + dt.timedelta(days=400)), 1, 2))
    _nothing_stored(fdbqueue_db)


def test_a_cycle_cannot_be_written(fdbqueue_db, backend):
    """A node waits only on nodes added before it, of its own workflow, each once."""
    from django_fdbqueue.tasks.exceptions import InvalidWorkflow

    wf, other = Workflow(), Workflow()
    first = wf.add(call(tf.add, 1, 2))
    stranger = other.add(call(tf.add, 1, 2))
    with pytest.raises(InvalidWorkflow, match=r"Node 0 belongs to another workflow"):
        wf.add(call(tf.add, 3, 4), after=[stranger])
    with pytest.raises(InvalidWorkflow, match=r"Node 0 is listed twice"):
        wf.add(call(tf.add, 3, 4), after=[first, first])
    with pytest.raises(InvalidWorkflow, match=r"after= takes nodes that add\(\) returned, not a int"):
        wf.add(call(tf.add, 3, 4), after=[0])
    assert len(wf) == 1  # the refused steps were not added
    wf.enqueue()
    with pytest.raises(InvalidWorkflow, match="enqueued already"):
        wf.add(call(tf.add, 3, 4), after=[first])
    with pytest.raises(InvalidWorkflow, match="enqueued already"):
        wf.enqueue()


def test_every_step_uses_one_fdbqueue_backend(fdbqueue_db, settings):
    from django_fdbqueue.tasks.exceptions import InvalidWorkflow

    settings.TASKS = {
        **settings.TASKS,
        "dummy": {"BACKEND": _dummy_backend_path()},
        "other": {"BACKEND": "django_fdbqueue.tasks.FDBQueueBackend", "QUEUES": ["default"]},
    }
    with pytest.raises(
        InvalidWorkflow, match=r"uses TASKS\['dummy'\], a DummyBackend: workflows run on FDBQueueBackend"
    ):
        chain(call(tf.add.using(backend="dummy"), 1, 2)).enqueue()
    with pytest.raises(InvalidWorkflow, match=r"Step 1 .*TASKS\['other'\].*TASKS\['default'\]: every step"):
        group(call(tf.add, 1, 2), call(tf.add.using(backend="other"), 1, 2)).enqueue()
    _nothing_stored(fdbqueue_db)
    handle = chain(call(tf.add.using(backend="other"), 1, 2)).enqueue()  # another FDBQueueBackend: fine
    assert handle.backend == "other" and service.size(fdbqueue_db, "tasks.default") == 1
    with pytest.raises(WorkflowDoesNotExist):
        get_workflow(handle.id)  # a workflow belongs to its backend
    assert get_workflow(handle.id, "other").status == "RUNNING"


def test_a_part_refused_halfway_adds_none_of_its_steps(fdbqueue_db, backend, settings):
    from django_fdbqueue.tasks.exceptions import InvalidWorkflow

    settings.TASKS = {**settings.TASKS, "other": {"BACKEND": "django_fdbqueue.tasks.FDBQueueBackend"}}
    wf = Workflow()
    first = wf.add(call(wt.double, 1))
    with pytest.raises(InvalidWorkflow, match="Step 3 .*every step of a workflow uses one backend"):
        wf.add(group(call(wt.double, 2), call(wt.double, 3), call(wt.double.using(backend="other"), 4)), after=[first])
    assert len(wf) == 1 and wf.successor_counts == [0]
    last = wf.add(call(wt.collect), after=[first])
    assert last.index == 1
    handle = wf.enqueue()
    run_burst(backend)
    assert handle.result(last).return_value == [2]


def test_too_many_nodes_started_together_are_refused(fdbqueue_db, backend, monkeypatch):
    from django_fdbqueue.tasks.exceptions import InvalidWorkflow
    from django_fdbqueue.tasks.workflows import canvas, storing

    monkeypatch.setattr(canvas, "MAX_FAN_OUT", 3)
    monkeypatch.setattr(storing, "MAX_FAN_OUT", 3)
    monkeypatch.setattr(canvas, "MAX_NODES", 6)
    with pytest.raises(InvalidWorkflow, match="starts at most 3 steps at once; 4 of this one's wait on nothing"):
        group(*(call(wt.double, n) for n in range(4))).enqueue()
    wf = Workflow()
    top = wf.add(call(wt.double, 0))
    for n in range(3):
        wf.add(call(wt.double, n), after=[top])
    with pytest.raises(InvalidWorkflow, match="Node 0 would have over 3 steps waiting on it"):
        wf.add(call(wt.double, 4), after=[top])
    wf.add(call(wt.double, 5))
    wf.add(call(wt.double, 6))
    with pytest.raises(InvalidWorkflow, match="at most 6 steps"):
        wf.add(call(wt.double, 7))
    _nothing_stored(fdbqueue_db)


def test_a_workflow_enqueues_from_async_code(fdbqueue_db, backend):
    import asyncio

    handle = asyncio.run(chain(call(wt.double, 1), call(wt.collect)).aenqueue(name="async"))
    assert handle.status == "RUNNING" and handle.name == "async"


def test_a_finished_workflow_is_forgotten_after_the_retention(fdbqueue_db, backend, monkeypatch):
    from django_fdbqueue.tasks.workflows import headers

    old = chain(call(wt.double, 1)).enqueue()
    run_burst(backend)
    old.refresh()
    expires = get_workflow(old.id)
    header = headers.get(fdbqueue_db, old.id)
    assert old.status == "SUCCESSFUL" and header.expires_us is not None and expires.finished_at is not None
    monkeypatch.setattr(headers, "now_micros", lambda: header.expires_us + 1)  # time passes
    chain(call(wt.double, 2)).enqueue()
    run_burst(backend)  # the next workflow to finish forgets the old one
    with pytest.raises(WorkflowDoesNotExist):
        get_workflow(old.id)
    assert old.id not in [w.id for w in list_workflows("SUCCESSFUL").items]
    begin, end = Keys(old.id).everything()
    assert list(fdbqueue_db.create_transaction().get_range(begin, end, limit=1)) == []


def test_a_stopped_workflow_is_kept_until_its_members_are_marked(fdbqueue_db, backend, monkeypatch):
    """A sweep cut short (its worker died) leaves READY records: the workflow stays listed, one
    more retention at a time, until cancel_workflow marks them; then it is forgotten."""
    from django_fdbqueue.tasks.workflows import headers, stopping

    monkeypatch.setattr(stopping, "sweep", lambda db, workflow_id: None)  # the sweeper dies
    stopped = chain(call(wt.explode, "x"), call(wt.double, 1)).enqueue()
    run_burst(backend)
    header = headers.get(fdbqueue_db, stopped.id)
    assert header.status == "FAILED" and not header.swept
    monkeypatch.setattr(headers, "now_micros", lambda: header.expires_us + 1)
    chain(call(wt.double, 2)).enqueue()
    run_burst(backend)
    kept = headers.get(fdbqueue_db, stopped.id)
    assert kept is not None and kept.expires_us > header.expires_us
    assert stopped.result(1).status == TaskResultStatus.READY  # not marked: that is why it is kept
    monkeypatch.undo()
    assert cancel_workflow(stopped.id).swept and stopped.result(1).status == TaskResultStatus.FAILED


# --- reading ------------------------------------------------------------------------------------------


def test_workflows_are_listed_by_status_a_page_at_a_time(fdbqueue_db, backend):
    from django_fdbqueue.tasks.exceptions import InvalidWorkflow
    from django_fdbqueue.tasks.workflows import workflow_counts

    ids = [chain(call(wt.double, n)).enqueue(name=f"wf-{n}").id for n in range(5)]
    first = list_workflows("RUNNING", limit=2)
    assert [w.id for w in first.items] == ids[:2] and first.next is not None
    rest = list_workflows("RUNNING", after=first.next, limit=10)
    assert [w.id for w in rest.items] == ids[2:] and rest.next is None
    assert [w.name for w in rest.items] == ["wf-2", "wf-3", "wf-4"]
    run_burst(backend)
    assert [w.id for w in list_workflows("SUCCESSFUL").items] == ids
    assert workflow_counts()["SUCCESSFUL"] == 5 and workflow_counts()["RUNNING"] == 0
    with pytest.raises(InvalidWorkflow, match="status must be one of"):
        list_workflows("DONE")
    with pytest.raises(InvalidWorkflow, match="after must be a page's next cursor"):
        list_workflows("RUNNING", after="nonsense")


def test_the_graph_shows_each_node_s_state_and_attempts(fdbqueue_db, backend):
    handle = chord([call(wt.double, n) for n in range(3)], call(wt.collect)).enqueue()
    nodes = handle.nodes()
    assert [(n.index, n.state, n.attempts, n.predecessor_count) for n in nodes] == [
        (0, "READY", 0, 0),
        (1, "READY", 0, 0),
        (2, "READY", 0, 0),
        (3, "WAITING", 0, 3),
    ]
    assert nodes[3].task_path == wt.collect.module_path and handle.predecessors(3) == [0, 1, 2]
    assert [n.index for n in handle.nodes(after=1, limit=1)] == [2]
    assert handle.predecessors(3, after=0, limit=1) == [1]
    run_burst(backend)
    assert [(n.state, n.attempts) for n in handle.nodes()] == [("SUCCESSFUL", 1)] * 4


def test_the_member_queues_come_from_the_header_in_one_read(fdbqueue_db, backend, monkeypatch):
    """Who may see a workflow depends on its members' queues: kept in the header at enqueue. A
    workflow stored before the header kept them has its nodes read instead."""
    from django_fdbqueue.tasks.workflows import reading

    emails = call(wt.double.using(queue_name="emails"), 1)
    handle = chain(call(wt.double, 0), emails).enqueue()
    expected = {QUEUE, "tasks.emails"}

    def no_node_reads(*args):
        raise AssertionError("the nodes were read")

    with monkeypatch.context() as patched:
        patched.setattr(reading, "_queues_page", no_node_reads)
        assert get_workflow(handle.id).queues() == expected
    handle.member_queues = None  # as read from a header written before it kept them
    assert handle.queues() == expected


# --- enqueueing ----------------------------------------------------------------------------------------


def test_an_interrupted_enqueue_runs_nothing_and_resumes(fdbqueue_db, backend, monkeypatch):
    from django_fdbqueue.tasks.exceptions import InvalidWorkflow
    from django_fdbqueue.tasks.workflows import storing

    monkeypatch.setattr(storing, "BATCH_NODES", 2)  # three transactions of nodes
    real_store, calls = storing._store, []

    def dies_at_the_second_batch(db, *args):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the process died")
        return real_store(db, *args)

    monkeypatch.setattr(storing, "_store", dies_at_the_second_batch)
    wf = Workflow()
    wf.add(chord([call(wt.double, n) for n in range(4)], call(wt.collect)))
    with pytest.raises(RuntimeError):
        wf.enqueue()
    with pytest.raises(InvalidWorkflow, match="its enqueue began"):  # what is stored must not change
        wf.add(call(wt.double, 9))
    assert get_workflow(wf.id).status == "STORING"
    assert [w.id for w in list_workflows("STORING").items] == [wf.id]
    assert not service.queue_exists(fdbqueue_db, QUEUE)  # nothing runs before every node is stored
    handle = wf.enqueue()
    assert handle.status == "RUNNING" and service.size(fdbqueue_db, QUEUE) == 4
    run_burst(backend)
    assert handle.result(4).return_value == [0, 2, 4, 6]


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
@pytest.mark.parametrize("step", ["_begin", "_store", "_launch"])
def test_a_lost_answer_while_enqueueing_stores_and_starts_once(fdbqueue_db, backend, faults, monkeypatch, fault, step):
    """1021 on the commit of the header, of the nodes, or of the start: retried, applied once."""
    from django_fdbqueue.tasks.workflows import storing

    real = getattr(storing, step)

    def lose_the_answer(db, *args):
        faults.fail_next(fault)
        return real(db, *args)

    monkeypatch.setattr(storing, step, lose_the_answer)
    wf = Workflow()
    wf.add(chord([call(wt.double, n) for n in range(3)], call(wt.collect)))
    handle = wf.enqueue()
    assert faults.injected[fault] == 1
    assert handle.status == "RUNNING" and service.size(fdbqueue_db, QUEUE) == 3
    run_burst(backend)
    handle.refresh()
    assert handle.status == "SUCCESSFUL" and handle.result(3).return_value == [0, 2, 4]
    assert handle.result(3).attempts == 1


# --- size ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_a_chord_of_10000_members_enqueues_in_batches_and_completes(fdbqueue_db, backend, monkeypatch, engine_name):
    """Stored in batches well under FoundationDB's limits, started in one transaction, the
    callback's 10,000 results read a page per transaction."""
    from django_fdbqueue.tasks.workflows import storing

    sizes, real_store = [], storing._store

    def measured(db, workflow_id, entries):
        sizes.append(sum(entry.cost for entry in entries))
        return real_store(db, workflow_id, entries)

    monkeypatch.setattr(storing, "_store", measured)
    members = 10_000
    handle = chord([call(wt.double, n) for n in range(members)], call(wt.total)).enqueue()
    assert handle.status == "RUNNING" and handle.size == members + 1
    assert len(sizes) >= members // storing.BATCH_NODES and max(sizes) <= storing.BATCH_BYTES
    assert service.size(fdbqueue_db, QUEUE) == members
    # Threads for a cluster's round trips, claims spread so they rarely meet.
    run_burst(backend, concurrency=4 if engine_name == "embedded" else 8, deadline=240, spread=16)
    handle.refresh()
    assert handle.status == "SUCCESSFUL" and handle.succeeded == members + 1
    callback = handle.result(members)
    assert callback.return_value == members * (members - 1) and callback.attempts == 1
