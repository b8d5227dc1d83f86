"""The Django Tasks backend: the framework's contract, results in the store, workers running tasks.

In-process tests drive :class:`TaskWorkers` directly; the tests at the end run
``manage.py fdbqueue worker --tasks`` as separate processes (see ``task_worker``). Every test
runs per engine through ``fdbqueue_db``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import signal
import time

import pytest
from django.utils import timezone

from django_fdbqueue import service
from django_fdbqueue.cli import worker as worker_command
from django_fdbqueue.fdbapi import ErrorCode, FDBError, make_error
from django_fdbqueue.tasks import backend as backend_module
from django_fdbqueue.tasks import FDBQueueBackend, limits, results
from django_fdbqueue.tasks import runner as task_runner
from django_fdbqueue.tasks.compat import InvalidTaskError, TaskResultDoesNotExist, TaskResultStatus, task_backends
from django_fdbqueue.tasks.exceptions import ArgumentsTooLarge, ResultTooLarge
from django_fdbqueue.tasks.runner import TaskWorkers, backend_named
from django_fdbqueue.worker import Worker
from django_fdbqueue.worker.runner import DEFAULT_LEASE

from . import task_functions as tf

DEADLINE = 60


def wait_until(condition, seconds: float = DEADLINE, what: str = "the condition") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def finished(result, seconds: float = DEADLINE):
    def done() -> bool:
        result.refresh()
        return result.is_finished

    wait_until(done, seconds, f"task {result.id} to finish")
    return result


@pytest.fixture
def backend(fdbqueue_db) -> FDBQueueBackend:
    return backend_named("default")


@pytest.fixture
def workers(backend):
    """Start in-process workers (``workers(concurrency=..)``); stopped after the test."""
    running: list[TaskWorkers] = []

    def start(**options) -> TaskWorkers:
        group = TaskWorkers(backend, **options)
        group.start()
        running.append(group)
        return group

    yield start
    for group in running:
        group.abort()
        group.wait(DEADLINE)


# --- the contract ------------------------------------------------------------------------------------


def test_the_backend_declares_what_it_supports(backend):
    assert (backend.supports_defer, backend.supports_priority, backend.supports_get_result) == (True, True, True)
    assert backend.supports_async_task is True
    assert list(backend.check()) == []


def test_enqueue_stores_a_ready_result_and_a_queue_item(fdbqueue_db, backend):
    result = tf.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY and result.backend == "default"
    assert result.args == [2, 3] and result.kwargs == {} and result.enqueued_at is not None
    again = backend.get_result(result.id)
    assert again.status == TaskResultStatus.READY and again.task.func is tf.add.func
    info = service.get_queue(fdbqueue_db, "tasks.default")  # created on first use
    assert (info.kind, info.size) == ("priority", 1)
    with pytest.raises(ValueError, match="not finished"):
        again.return_value


def test_validation_uses_the_frameworks_errors(fdbqueue_db, backend):
    with pytest.raises(InvalidTaskError, match="JSON"):
        tf.add.enqueue(object(), 1)
    with pytest.raises(InvalidTaskError, match="JSON"):
        tf.add.enqueue(1, b=float("nan"))
    with pytest.raises(InvalidTaskError, match="not valid for backend"):
        tf.add.using(queue_name="elsewhere")
    with pytest.raises(InvalidTaskError, match="priority"):
        tf.add.using(priority=101)
    with pytest.raises(InvalidTaskError, match="aware"):
        tf.add.using(run_after=dt.datetime(2030, 1, 1))
    assert not service.queue_exists(fdbqueue_db, "tasks.default")  # nothing was stored


def test_arguments_that_are_not_json_raise_type_error_as_the_contract_says(fdbqueue_db, backend):
    """The framework's contract (and Django 6's) is TypeError; InvalidTaskError still catches it too."""
    for args, kwargs in (([object()], {}), ([{1, 2}], {}), ([b"\xff"], {}), ([], {"b": float("inf")})):
        with pytest.raises(TypeError, match="JSON") as caught:
            backend.enqueue(tf.add, args, kwargs)
        assert isinstance(caught.value, InvalidTaskError)
    with pytest.raises(TypeError, match="string names") as caught:
        backend.enqueue(tf.add, [], {1: 2})
    assert isinstance(caught.value, InvalidTaskError)
    assert not service.queue_exists(fdbqueue_db, "tasks.default")  # nothing was stored


def test_arguments_too_large_for_the_record_are_refused(fdbqueue_db, backend):
    """Arguments must leave the record room for its runs, or the task could never be finished."""
    allowed = limits.MAX_RECORD_BYTES - limits.RUN_ROOM
    for size in (allowed, 200_000):  # one that a value would hold, one that it would not
        with pytest.raises(ArgumentsTooLarge, match=f"at most {allowed:,} are allowed") as caught:
            tf.add.enqueue("x" * size, "y")
        assert isinstance(caught.value, InvalidTaskError)
    assert not service.queue_exists(fdbqueue_db, "tasks.default")  # nothing was stored
    accepted = tf.add.enqueue("x" * (allowed - 1_000), "y")
    assert limits.size(results.get(fdbqueue_db, accepted.id)) <= allowed


def test_get_result_of_an_unknown_id(backend):
    for bad in ("no-such-id", "", 5):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(bad)


def test_async_variants(fdbqueue_db, backend):
    async def both():
        result = await tf.add.aenqueue(1, 1)
        return await backend.aget_result(result.id)

    assert asyncio.run(both()).status == TaskResultStatus.READY


def test_bad_options_are_reported_by_the_checks():
    backend = FDBQueueBackend(
        "bad",
        {"QUEUES": ["ok", "not ok"], "OPTIONS": {"LEASE": 0, "MAX_ATTEMPTS": 0, "RESULT_RETENTION": -1, "TYPO": 1}},
    )
    found = list(backend.check())
    messages = [m.msg for m in found]
    assert len(messages) == 5 and all(m.startswith("TASKS['bad']") for m in messages)
    # The same id namespace as the FDBQUEUE checks (reference/checks.md lists them together).
    assert {m.id for m in found} == {"fdbqueue.E101"}
    assert any("'not ok'" in m for m in messages) and any("TYPO" in m for m in messages)


# --- running them ---------------------------------------------------------------------------------------


def test_a_worker_runs_tasks_and_records_results(fdbqueue_db, workers):
    ok = tf.add.enqueue(2, 3)
    email = tf.shout.enqueue("hi")
    context = tf.attempt_number.enqueue()
    group = workers(concurrency=2)
    assert finished(ok).status == TaskResultStatus.SUCCESSFUL and ok.return_value == 5
    assert finished(email).return_value == "HI"
    assert finished(context).return_value == 1
    assert ok.worker_ids == [group.worker_id] and ok.attempts == 1
    assert ok.started_at <= ok.finished_at and ok.last_attempted_at == ok.started_at
    assert service.get_queue(fdbqueue_db, "tasks.emails").size == 0


def test_a_failing_task_is_recorded_with_its_traceback_and_can_be_retried(fdbqueue_db, backend, workers):
    result = tf.fail.enqueue("boom")
    bad_return = tf.returns_a_set.enqueue()
    workers()
    assert finished(result).status == TaskResultStatus.FAILED
    (error,) = result.errors
    assert error.exception_class is ValueError and "ValueError: boom" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        result.return_value
    assert finished(bad_return).status == TaskResultStatus.FAILED  # a set is no JSON
    assert bad_return.errors[0].exception_class is TypeError
    again = backend.retry(result.id)
    assert again.status == TaskResultStatus.READY
    wait_until(lambda: len(backend.get_result(result.id).errors) == 2, what="the second failure")
    assert backend.get_result(result.id).attempts == 2
    with pytest.raises(InvalidTaskError, match="Only a failed task"):
        backend.retry(tf.add.enqueue(1, 2).id)


def test_priority_and_run_after_are_honoured(fdbqueue_db, tmp_path, workers):
    log = tmp_path / "order.txt"
    soon = timezone.now() + dt.timedelta(seconds=1)
    later = tf.record.using(run_after=soon).enqueue(str(log), "delayed")
    low = tf.record.using(priority=-5).enqueue(str(log), "low")
    mid = tf.record.enqueue(str(log), "mid")
    high = tf.record.using(priority=50).enqueue(str(log), "high")
    workers(concurrency=1)
    for result in (later, low, mid, high):
        finished(result)
    assert log.read_text().split() == ["high", "mid", "low", "delayed"]
    assert later.started_at >= soon


def test_finished_results_are_forgotten_after_the_retention(fdbqueue_db, backend, workers, monkeypatch):
    result = tf.add.enqueue(1, 2)
    workers()
    finished(result)
    record = results.get(fdbqueue_db, result.id)
    assert record.expires_us is not None
    # Time passes beyond the retention: the next finished task forgets the old result.
    monkeypatch.setattr(task_runner, "now_micros", lambda: record.expires_us + 1)
    monkeypatch.setattr(results, "now_micros", lambda: record.expires_us + 1)
    finished(tf.add.enqueue(3, 4))
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result(result.id)


def test_a_task_already_finished_is_not_run_again(fdbqueue_db, backend, workers):
    """At-least-once delivery may hand a finished task's item out again: it is acked and dropped."""
    result = tf.add.enqueue(1, 1)
    workers()
    finished(result)
    service.push(fdbqueue_db, "tasks.default", {"result_id": result.id})  # a stray second delivery
    wait_until(lambda: service.get_queue(fdbqueue_db, "tasks.default").popped == 2, what="the stray item")
    assert backend.get_result(result.id).worker_ids == result.worker_ids


def test_a_result_too_large_to_store_fails_the_task_once(fdbqueue_db, workers):
    """Defect 2: a return value over the record's limit made the finishing transaction fail (2103),
    so the task ran again on every delivery and stayed RUNNING. It is FAILED, once, and acked."""
    too_big = tf.big_result.enqueue(150_000)
    fits = tf.big_result.enqueue(80_000)
    loud = tf.fail_loudly.enqueue(150_000)  # the FAILED record's traceback must fit too
    workers()
    assert finished(too_big).status == TaskResultStatus.FAILED
    (error,) = too_big.errors
    assert error.exception_class is ResultTooLarge
    assert "150,002 bytes of JSON" in error.traceback and "over the limit of 100,000" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        too_big.return_value
    assert finished(fits).status == TaskResultStatus.SUCCESSFUL and len(fits.return_value) == 80_000
    assert finished(loud).status == TaskResultStatus.FAILED
    (error,) = loud.errors
    assert error.exception_class is ValueError and "characters cut" in error.traceback
    assert error.traceback.startswith("Traceback") and error.traceback.rstrip().endswith("x end")
    wait_until(lambda: service.get_queue(fdbqueue_db, "tasks.default").popped == 3, what="the three acks")
    info = service.get_queue(fdbqueue_db, "tasks.default")
    assert (info.size, info.leased, info.delayed, info.dead) == (0, 0, 0, 0)
    for result in (too_big, fits, loud):
        result.refresh()
        assert result.attempts == 1  # run once, never again
        assert limits.size(results.get(fdbqueue_db, result.id)) <= limits.MAX_RECORD_BYTES


def test_a_failed_record_is_shortened_to_fit():
    """Many long errors (a task failed and retried often): tracebacks shortened, then oldest dropped."""
    errors = [
        {"exception_class_path": "builtins.ValueError", "traceback": f"Traceback {n}\n" + "y" * 5_000 + f"\nend {n}"}
        for n in range(60)
    ]
    record = results.Record(
        id="r",
        task_path="a.b",
        backend="default",
        queue_name="default",
        priority=0,
        args=["x" * 50_000],
        kwargs={},
        status=results.FAILED,
        errors=errors,
    )
    assert not limits.fits(record)
    fitted = limits.fitted(record)
    assert limits.fits(fitted) and fitted.args == record.args
    newest = fitted.errors[-1]["traceback"]
    assert newest.startswith("Traceback 59") and newest.endswith("end 59") and "characters cut" in newest
    assert 1 < len(fitted.errors) < 60
    assert limits.fitted(fitted) is fitted  # a record that fits is left alone


def test_async_task_functions_run(fdbqueue_db, backend, workers):
    added = tf.async_add.enqueue(2, 3)
    failed = tf.async_fail.enqueue("async boom")
    context = tf.async_attempt_number.enqueue()
    workers()
    assert finished(added).status == TaskResultStatus.SUCCESSFUL and added.return_value == 5
    assert finished(failed).status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class is ValueError and "ValueError: async boom" in failed.errors[0].traceback
    assert finished(context).return_value == 1


def test_concurrency_is_per_task_queue(fdbqueue_db, tmp_path, workers):
    """--concurrency 2 over two task queues: four tasks run at once, two from each queue."""
    release = tmp_path / "release"
    started = {name: [tmp_path / f"{name}-{n}" for n in range(2)] for name in ("default", "emails")}
    blocked = [
        tf.block_until_released.using(queue_name=name).enqueue(str(path), str(release))
        for name, paths in started.items()
        for path in paths
    ]
    group = workers(concurrency=2)
    assert [worker.concurrency for worker in group.workers] == [2, 2]
    everything = [path for paths in started.values() for path in paths]
    wait_until(lambda: all(path.exists() for path in everything), what="four tasks running at once")
    release.write_text("")
    for result in blocked:
        assert finished(result).status == TaskResultStatus.SUCCESSFUL


def test_a_burst_over_several_task_queues_ends_when_all_are_done(fdbqueue_db, backend, tmp_path, monkeypatch):
    """A task enqueues another on a queue whose worker had already found nothing: it runs too."""
    emails_polled = tmp_path / "emails-polled"
    real_claim = service.claim

    def claim(db, name, **options):
        lease = real_claim(db, name, **options)
        if name == "tasks.emails" and lease is None:
            emails_polled.touch()
        return lease

    monkeypatch.setattr(service, "claim", claim)
    chained = tf.enqueue_shout.enqueue("later", wait_for=str(emails_polled))
    group = TaskWorkers(backend, burst=True)
    group.start()
    try:
        assert group.wait(DEADLINE)
    finally:
        group.abort()
        group.wait(DEADLINE)
    follow_up = tf.shout.get_result(finished(chained, 0).return_value)
    assert follow_up.status == TaskResultStatus.SUCCESSFUL and follow_up.return_value == "LATER"
    assert group.stats.processed == 2


def test_one_default_lease_for_tasks_and_workers():
    """The backend's LEASE default is the worker's, and the command's help says which it is."""
    assert FDBQueueBackend("plain", {}).lease == DEFAULT_LEASE == 30
    assert Worker.__init__.__kwdefaults__["lease"] == DEFAULT_LEASE
    help_text = _worker_help()
    assert f"Default: {DEFAULT_LEASE:g} (with --tasks: the backend's LEASE option, {DEFAULT_LEASE:g}" in help_text
    assert "does not limit how long a handler may take" in help_text
    assert "per task queue" in help_text


def _worker_help() -> str:
    import argparse

    subcommands = argparse.ArgumentParser().add_subparsers()
    worker_command.register(subcommands)
    return " ".join(subcommands.choices["worker"].format_help().split())


# --- workers in other processes --------------------------------------------------------------------------


@pytest.fixture
def task_worker(fdbqueue_db, tmp_path):
    """Start ``manage.py fdbqueue worker --tasks ...`` processes on the test's store; killed after the test."""
    from .processes import command_process

    with command_process(tmp_path, "worker", "--tasks") as start:
        yield start


def test_a_worker_process_runs_a_task_and_any_process_reads_the_result(fdbqueue_db, task_worker):
    result = tf.add.enqueue(20, 22)
    process, _out, err = task_worker("--queue", "default", "--concurrency", "2")
    assert finished(result).return_value == 42, err.read_text()
    assert f"-{process.pid}-" in result.worker_ids[0]  # run by the other process
    process.send_signal(signal.SIGTERM)
    assert process.wait(DEADLINE) == 0, err.read_text()


def test_a_task_whose_worker_is_killed_is_completed_by_another(fdbqueue_db, task_worker, tmp_path):
    started, release = tmp_path / "started", tmp_path / "release"
    result = tf.block_until_released.enqueue(str(started), str(release))
    first, _out, err = task_worker("--lease", "1")
    wait_until(lambda: started.exists() or first.poll() is not None, what="the first worker to start the task")
    assert first.poll() is None, err.read_text()
    os.kill(first.pid, signal.SIGKILL)
    first.wait(DEADLINE)
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING and result.attempts == 1
    started.unlink()
    second, _out, err = task_worker("--lease", "1")
    wait_until(lambda: started.exists() or second.poll() is not None, what="the second worker to take it over")
    release.write_text("")
    assert finished(result).status == TaskResultStatus.SUCCESSFUL, err.read_text()
    assert result.return_value == "released" and result.attempts == 2
    assert len(set(result.worker_ids)) == 2
    second.send_signal(signal.SIGTERM)
    assert second.wait(DEADLINE) == 0, err.read_text()


def test_burst_runs_what_is_ready_on_every_queue_then_exits_0(fdbqueue_db, task_worker):
    """--burst: ready tasks of every queue, and tasks they enqueue, run; delayed ones wait; exit 0."""
    added = tf.add.enqueue(1, 2)
    shouted = tf.shout.enqueue("hey")  # on "emails"
    chained = tf.enqueue_shout.enqueue("later")  # on "default"; enqueues a task on "emails"
    delayed = tf.add.using(run_after=timezone.now() + dt.timedelta(hours=1)).enqueue(5, 5)
    process, out, err = task_worker("--burst", "--json")
    assert process.wait(DEADLINE) == 0, err.read_text()
    assert finished(added, 0).return_value == 3 and finished(shouted, 0).return_value == "HEY"
    follow_up = tf.shout.get_result(finished(chained, 0).return_value)
    assert follow_up.status == TaskResultStatus.SUCCESSFUL and follow_up.return_value == "LATER"
    delayed.refresh()
    assert delayed.status == TaskResultStatus.READY  # not due: not waited for
    summary = json.loads(out.read_text())
    assert summary["name"] == "tasks.default,tasks.emails"
    assert (summary["processed"], summary["failed"], summary["lost"]) == (4, 0, 0)
    assert "burst over" in err.read_text()


def test_the_worker_command_refuses_bad_task_options(fdbqueue_db, task_worker):
    for args in (("--queue", "elsewhere"), ("--backend", "nope"), ("jobs",)):
        process, _out, err = task_worker(*args)
        assert process.wait(DEADLINE) == 2, err.read_text()
        assert err.read_text().strip()


def test_records_written_by_a_newer_version_still_read():
    raw = results.Record(
        id="x", task_path="a.b", backend="default", queue_name="q", priority=0, args=[], kwargs={}
    ).dumps()
    newer = raw[:-1] + b',"added_later":1}'
    assert results.Record.loads(newer).id == "x"


def test_two_backends_keep_their_listings_apart(fdbqueue_db, settings):
    settings.TASKS = {
        **settings.TASKS,
        "other": {
            "BACKEND": "django_fdbqueue.tasks.FDBQueueBackend",
            "QUEUES": ["default"],
            "OPTIONS": {"QUEUE_PREFIX": "other."},
        },
    }
    ours = tf.add.enqueue(1, 1)
    tf.add.using(backend="other").enqueue(2, 2)
    for alias in ("default", "other"):
        (record,), _last = results.page(fdbqueue_db, alias, "default", results.READY, None, 10)
        assert record.backend == alias
        assert results.counts(fdbqueue_db, alias, "default")[results.READY] == 1
    assert service.get_queue(fdbqueue_db, "other.default").size == 1
    with pytest.raises(TaskResultDoesNotExist):  # a result belongs to its own backend
        task_backends["other"].get_result(ours.id)


def test_a_retry_is_a_new_run_and_needs_a_queue_still_configured(fdbqueue_db, backend, workers, settings):
    result = tf.fail.enqueue("x")
    group = workers()
    finished(result)
    group.abort()
    group.wait(DEADLINE)
    again = backend.retry(result.id)
    assert again.started_at is None and again.finished_at is None and again.enqueued_at > result.enqueued_at
    assert again.attempts == 1  # the earlier attempt is kept in the history
    failed_again = tf.fail.enqueue("y")
    workers()
    finished(failed_again)
    settings.TASKS = {"default": {**settings.TASKS["default"], "QUEUES": ["emails"]}}
    with pytest.raises(InvalidTaskError, match="no longer one of"):
        backend_named("default").retry(failed_again.id)


# --- a failed task: counted as failed, logged with its traceback, retried safely --------------------


def test_a_task_that_raised_counts_as_failed_in_the_worker_s_summary(fdbqueue_db, workers):
    """Issue 28: the summary said "3 processed, 0 failed" although tasks had failed."""
    ok, raised = tf.add.enqueue(1, 2), tf.fail.enqueue("boom")
    too_large = tf.big_result.enqueue(150_000)  # FAILED with ResultTooLarge, though it returned
    group = workers()
    for result in (ok, raised, too_large):
        finished(result)
    wait_until(lambda: group.stats.processed + group.stats.failed == 3, what="the three acks to be counted")
    stats = group.stats
    assert (stats.processed, stats.failed, stats.dead, stats.lost, stats.store_errors) == (1, 2, 0, 0, 0)
    info = service.get_queue(fdbqueue_db, "tasks.default")
    assert (info.size, info.leased, info.delayed, info.popped) == (0, 0, 0, 3)  # acknowledged, not retried


def test_a_failed_task_s_finished_signal_logs_its_traceback(fdbqueue_db, workers, caplog):
    """Issue 28: the framework logs a failed task with ``logger.exception``; sent outside any
    exception handling, its log showed ``NoneType: None`` instead of the traceback."""
    caplog.set_level(logging.INFO)
    raised, too_large = tf.fail.enqueue("boom"), tf.big_result.enqueue(150_000)
    workers()
    for result in (raised, too_large):
        finished(result)

    def logged() -> dict:
        return {r.getMessage().split()[1]: r for r in caplog.records if r.getMessage().endswith("state=FAILED")}

    wait_until(lambda: len(logged()) == 2, what="the framework's log of both failures")
    by_id = logged()
    assert by_id[f"id={raised.id}"].exc_info[0] is ValueError
    assert by_id[f"id={too_large.id}"].exc_info[0] is ResultTooLarge
    assert "ValueError: boom" in caplog.text and "NoneType: None" not in caplog.text


def _failed_task(db, backend):
    """A FAILED task, run once (without a worker) and its item gone."""
    result = tf.fail.enqueue("boom")
    task_runner.TaskRunner(backend, "test-worker")(service.pop(db, "tasks.default", end="max"))
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    return result


def _queued_again_once(db, backend, result_id: str) -> None:
    assert backend.get_result(result_id).status == TaskResultStatus.READY
    assert service.get_queue(db, "tasks.default").size == 1


@pytest.mark.django_db  # TaskRunner closes Django's old connections, in this thread here
@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_a_retry_whose_commit_answer_was_lost_is_applied_once(fdbqueue_db, backend, faults, fault):
    """Issue 28: after a lost answer (1021) that had applied, the retry refused its own write
    ("Only a failed task can be retried; this one is READY")."""
    result = _failed_task(fdbqueue_db, backend)
    faults.fail_next(fault)
    assert backend.retry(result.id).status == TaskResultStatus.READY
    assert faults.injected[fault] == 1
    _queued_again_once(fdbqueue_db, backend, result.id)


@pytest.mark.django_db  # TaskRunner closes Django's old connections, in this thread here
@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
def test_a_retry_that_timed_out_at_commit_is_applied_once(fdbqueue_db, backend, monkeypatch, applied):
    """A timeout (1031) leaves a commit in doubt too: the retry runs once more and knows its own write."""
    result = _failed_task(fdbqueue_db, backend)
    real_retry, calls = backend_module._retry, []

    def times_out_once(db, *args):
        calls.append(args)
        if len(calls) == 1:
            if applied:
                real_retry(db, *args)
            raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)
        return real_retry(db, *args)

    monkeypatch.setattr(backend_module, "_retry", times_out_once)
    assert backend.retry(result.id).status == TaskResultStatus.READY
    assert len(calls) == 2
    _queued_again_once(fdbqueue_db, backend, result.id)


@pytest.mark.django_db  # TaskRunner closes Django's old connections, in this thread here
def test_a_retry_that_keeps_timing_out_raises_the_timeout(fdbqueue_db, backend, monkeypatch):
    result = _failed_task(fdbqueue_db, backend)

    def times_out(db, *args):
        raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)

    monkeypatch.setattr(backend_module, "_retry", times_out)
    with pytest.raises(FDBError) as caught:
        backend.retry(result.id)
    assert caught.value.code == ErrorCode.TRANSACTION_TIMED_OUT
    assert backend.get_result(result.id).status == TaskResultStatus.FAILED


# --- per-key limits: LIMIT_KEY_ARG ------------------------------------------------------------------


def keyed_backend(arg="text") -> FDBQueueBackend:
    return FDBQueueBackend("default", {"QUEUES": ["default", "emails"], "OPTIONS": {"LIMIT_KEY_ARG": arg}})


def test_the_limit_key_argument_becomes_the_item_s_key(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "tasks.emails", "priority", key_concurrency=1)
    backend = keyed_backend()
    assert list(backend.check()) == []
    acme = {backend.enqueue(tf.shout, [], {"text": "acme"}).id for _ in range(2)}
    globex = backend.enqueue(tf.shout, [], {"text": "globex"}).id
    unkeyed = {backend.enqueue(tf.shout, ["no key"], {}).id, backend.enqueue(tf.shout, [], {"text": None}).id}

    leases = []
    while (lease := service.claim(db, "tasks.emails", lease=60, end="max")) is not None:
        leases.append(lease)
    claimed = [lease.item.value["result_id"] for lease in leases]
    # key_concurrency=1: one "acme" task at a time, the unkeyed ones unlimited.
    assert len(claimed) == 4 and len(acme & set(claimed)) == 1
    assert globex in claimed and unkeyed <= set(claimed)
    assert sorted(service.key_limit_state(db, "tasks.emails").at_limit) == ["acme", "globex"]
    first_acme = next(lease for lease in leases if lease.item.value["result_id"] in acme)
    service.ack(db, first_acme.receipt)
    last = service.claim(db, "tasks.emails", lease=60, end="max")
    assert last is not None and last.item.value["result_id"] in acme - set(claimed)


@pytest.mark.parametrize("bad", [5, "", "x" * 101, ["acme"], "\ud800"])
def test_a_bad_limit_key_is_refused_at_enqueue_and_stores_nothing(fdbqueue_db, bad):
    from django_fdbqueue.tasks.exceptions import InvalidLimitKey

    backend = keyed_backend("b")
    with pytest.raises(InvalidLimitKey, match=r"task argument 'b' is the limit key .*LIMIT_KEY_ARG") as caught:
        backend.enqueue(tf.add, [1], {"b": bad})
    assert isinstance(caught.value, InvalidTaskError)
    assert not service.queue_exists(fdbqueue_db, "tasks.default")  # nothing was stored


def test_a_bad_limit_key_option_is_reported_by_the_checks():
    for bad in (5, "not a name", ""):
        messages = [m.msg for m in keyed_backend(bad).check() if m.id == "fdbqueue.E101"]
        assert messages == [
            "TASKS['default'] (FDBQueueBackend): LIMIT_KEY_ARG must be None or the name of a keyword argument."
        ], bad
    assert list(keyed_backend(None).check()) == []


def test_an_item_naming_another_queue_s_task_is_dropped_unrun(fdbqueue_db, backend, caplog):
    """Issue 36: a worker ran whatever result id it popped, so a user allowed to push to one task
    queue could run a task of another (its random id known). Now it drops the item, logged."""
    from django_fdbqueue.tasks.backend import ensure_queue

    other = tf.shout.enqueue("secret")  # the "emails" queue's task
    ensure_queue(fdbqueue_db, backend.queue_for("default"), backend.max_attempts)
    service.push(fdbqueue_db, backend.queue_for("default"), {"result_id": other.id})
    group = TaskWorkers(backend, ["default"], burst=True)
    group.start()
    try:
        assert group.wait(DEADLINE)
    finally:
        group.abort()
        group.wait(DEADLINE)
    other.refresh()
    assert other.status == TaskResultStatus.READY and not other.worker_ids
    assert service.size(fdbqueue_db, backend.queue_for("default")) == 0
    assert "dropping it without running the task" in caplog.text
    assert service.size(fdbqueue_db, backend.queue_for("emails")) == 1  # its own item waits for its worker
