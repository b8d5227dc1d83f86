"""Workflows: chains, groups, chords and DAGs of tasks, each callback run exactly once.

Every test runs per engine through ``fdbqueue_db`` (those injecting faults on the embedded
engine only). Workers are the backend's own (``TaskWorkers``), or ``TaskRunner.handle`` with
``ack_with`` where a test must choose the moment of each commit.
"""

from __future__ import annotations

import threading
import time

import pytest

from django_fdbqueue import service
from django_fdbqueue.fdbapi import ErrorCode, FDBError
from django_fdbqueue.tasks import results
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


def run_burst(backend, concurrency: int = 2) -> TaskWorkers:
    """Run the task queues' workers until nothing is ready and nothing runs."""
    group_ = TaskWorkers(backend, burst=True, concurrency=concurrency)
    group_.start()
    try:
        assert group_.wait(DEADLINE), "the burst did not end"
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
