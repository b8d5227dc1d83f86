"""The worker: in-process behaviour, a consumer killed mid-item, and the command under SIGTERM.

Every wait is bounded and every hand-off is an Event, a pipe or a file; timing only matters
where leases and delays are the subject, and there the margins are several times the tick.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from django_fdbqueue import service
from django_fdbqueue.exceptions import (
    InvalidArgument,
    LeaseNotFound,
    QueueNotFound,
    WrongQueueKind,
)
from django_fdbqueue.fdbapi import make_error
from django_fdbqueue.worker import Backoff, Worker, retry_delay
from tests.processes import child_database, kill_leftovers

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Upper bound for any single wait in these tests; none should come near it.
DEADLINE = 20.0


def wait_until(predicate, seconds: float = DEADLINE, interval: float = 0.02):
    """Poll ``predicate`` until it returns something true, or fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        result = predicate()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out after {seconds}s waiting for {predicate}"
        time.sleep(interval)


@pytest.fixture
def queue(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs")
    return "jobs"


@pytest.fixture
def worker_factory(fdbqueue_db):
    """Make workers with quick polling, and make sure none outlives its test."""
    made: list[Worker] = []

    def make(name, handler, **options):
        options.setdefault("poll_wait", 0.2)
        worker = Worker(fdbqueue_db, name, handler, **options)
        made.append(worker)
        return worker

    yield make
    for worker in made:
        if worker.started:
            worker.abort()
            worker.wait(DEADLINE)


# --- back-off ---------------------------------------------------------------------------------


def test_retry_delay_doubles_up_to_the_cap():
    no_jitter = dict(jitter=0.0)
    assert [retry_delay(n, base=1.0, maximum=10.0, **no_jitter) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 4, 8, 10, 10]
    assert retry_delay(0, base=2.0, **no_jitter) == 2.0  # never claimed: treated as the first
    assert retry_delay(10_000, base=1.0, maximum=300.0, **no_jitter) == 300.0  # no overflow
    assert retry_delay(3, base=1.0, maximum=0.0) == 0.0
    # Jitter shortens by up to its fraction, never lengthens.
    assert retry_delay(3, base=1.0, jitter=0.5, random_fraction=lambda: 1.0) == 2.0
    assert retry_delay(3, base=1.0, jitter=0.5, random_fraction=lambda: 0.0) == 4.0


def test_backoff_grows_and_resets():
    backoff = Backoff(initial=0.1, maximum=0.5, jitter=0.0)
    assert [backoff.next() for _ in range(5)] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    backoff.reset()
    assert backoff.next() == pytest.approx(0.1)
    with pytest.raises(ValueError):
        Backoff(initial=0.0)


# --- the worker in-process --------------------------------------------------------------------


def test_worker_handles_and_acks_every_item(fdbqueue_db, queue, worker_factory):
    for n in range(6):
        service.push(fdbqueue_db, queue, {"n": n})
    seen, lock, all_seen = [], threading.Lock(), threading.Event()

    def handler(item):
        with lock:
            seen.append((item.value["n"], item.attempts))
            if len(seen) == 6:
                all_seen.set()

    worker = worker_factory(queue, handler, concurrency=3, lease=10)
    worker.start()
    assert all_seen.wait(DEADLINE)
    worker.stop()
    assert worker.wait(DEADLINE)
    assert sorted(seen) == [(n, 1) for n in range(6)]
    assert worker.stats.processed == 6 and worker.stats.failed == 0
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.size, info.leased, info.delayed, info.dead) == (0, 0, 0, 0)


def test_a_failed_item_is_released_with_back_off_and_retried(fdbqueue_db, queue, worker_factory, caplog):
    service.push(fdbqueue_db, queue, "flaky")
    failed_at, succeeded = [], threading.Event()
    attempts = []

    def handler(item):
        attempts.append(item.attempts)
        if item.attempts == 1:
            failed_at.append(time.monotonic())
            raise RuntimeError("first try fails")
        succeeded.set()

    # base 2 s, cap 2 s, jitter up to half: the item stays hidden for 1 to 2 seconds.
    worker = worker_factory(queue, handler, base_backoff=2.0, max_backoff=2.0)
    with caplog.at_level(logging.INFO, logger="django_fdbqueue.worker"):
        worker.start()
        # Released as delayed, not ready: invisible to everyone for now.
        wait_until(lambda: service.get_queue(fdbqueue_db, queue).delayed == 1)
        assert service.peek(fdbqueue_db, queue) is None
        states = [row.state for row in service.scheduled(fdbqueue_db, queue).items]
        assert states == ["delayed"]
        assert succeeded.wait(DEADLINE)
    retried_after = time.monotonic() - failed_at[0]
    worker.stop()
    assert worker.wait(DEADLINE)
    assert attempts == [1, 2]
    assert retried_after >= 0.9  # the shortest back-off is 1 s
    assert (worker.stats.processed, worker.stats.failed) == (1, 1)
    (failure_log,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "attempt 1" in failure_log.getMessage()
    assert "Traceback" in caplog.text and "RuntimeError: first try fails" in caplog.text
    assert service.get_queue(fdbqueue_db, queue).size == 0


def test_an_item_out_of_attempts_becomes_a_dead_letter(fdbqueue_db, worker_factory):
    service.create_queue(fdbqueue_db, "fragile", max_attempts=2)
    service.push(fdbqueue_db, "fragile", "poison")
    calls = []

    def handler(item):
        calls.append(item.attempts)
        raise ValueError("always fails")

    worker = worker_factory("fragile", handler, base_backoff=0.05, max_backoff=0.05)
    worker.start()
    wait_until(lambda: service.get_queue(fdbqueue_db, "fragile").dead == 1)
    worker.stop()
    assert worker.wait(DEADLINE)
    assert calls == [1, 2]
    assert (worker.stats.failed, worker.stats.dead) == (2, 1)
    (letter,) = service.dead_letters(fdbqueue_db, "fragile").items
    assert letter.item.value == "poison" and letter.item.attempts == 2


def _count_extends(monkeypatch) -> list[int]:
    """A one-element list counting the extends that succeeded (the heartbeat's, here)."""
    count, real = [0], service.extend

    def extend(*args, **kwargs):
        lease = real(*args, **kwargs)
        count[0] += 1
        return lease

    monkeypatch.setattr(service, "extend", extend)
    return count


def test_the_heartbeat_keeps_a_long_handler_s_lease(fdbqueue_db, queue, worker_factory, monkeypatch):
    """The service's clock stands still but for half-lease steps, each taken after a fresh
    extend: the lease can run out only if the heartbeat stops, not because a thread ran late."""
    from .clock import StillClock

    clock, extends = StillClock(monkeypatch), _count_extends(monkeypatch)
    service.push(fdbqueue_db, queue, "long")
    started, finish = threading.Event(), threading.Event()

    def handler(item):
        started.set()
        assert finish.wait(DEADLINE)

    lease = 0.8
    worker = worker_factory(queue, handler, lease=lease)
    worker.start()
    assert started.wait(DEADLINE)
    for _step in range(7):  # 3.5 leases of the service's time: nobody else gets the item
        seen = extends[0]
        wait_until(lambda: extends[0] > seen)
        clock.advance(lease / 2)
        assert service.claim(fdbqueue_db, queue, lease=5) is None
        assert service.get_queue(fdbqueue_db, queue).leased == 1
    finish.set()
    wait_until(lambda: worker.stats.processed == 1)
    worker.stop()
    assert worker.wait(DEADLINE)
    assert worker.stats.lost == 0
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.size, info.leased) == (0, 0)


def test_a_lost_lease_is_not_acked(fdbqueue_db, queue, worker_factory, monkeypatch, caplog):
    service.push(fdbqueue_db, queue, "contested")
    started, finish = threading.Event(), threading.Event()
    extend_calls = []

    def extend(*args, **kwargs):
        extend_calls.append(args)
        raise LeaseNotFound()

    monkeypatch.setattr(service, "extend", extend)

    def handler(item):
        started.set()
        assert finish.wait(DEADLINE)

    worker = worker_factory(queue, handler, lease=0.6)
    with caplog.at_level(logging.WARNING, logger="django_fdbqueue.worker"):
        worker.start()
        assert started.wait(DEADLINE)
        wait_until(lambda: worker.stats.lost == 1)
        worker.stop()  # before the handler ends, or the worker could claim the item again
        finish.set()
        assert worker.wait(DEADLINE)
    assert len(extend_calls) == 1  # a lost lease is not extended again
    assert worker.stats.processed == 0
    assert "Lost the lease" in caplog.text and "Not acknowledging" in caplog.text
    # Not acked: once the lease is over, the item is there for the next consumer.
    again = service.claim(fdbqueue_db, queue, lease=5, wait=5)
    assert again is not None and again.item.value == "contested" and again.item.attempts == 2


def test_stop_lets_the_item_in_progress_finish(fdbqueue_db, queue, worker_factory):
    service.push(fdbqueue_db, queue, "first")
    service.push(fdbqueue_db, queue, "second")
    started, finish = threading.Event(), threading.Event()
    handled = []

    def handler(item):
        started.set()
        assert finish.wait(DEADLINE)
        handled.append(item.value)

    worker = worker_factory(queue, handler)
    worker.start()
    assert started.wait(DEADLINE)
    worker.stop()
    assert not worker.wait(0.3)  # still finishing
    assert worker.in_progress() == 1
    finish.set()
    assert worker.wait(DEADLINE)
    assert handled == ["first"] and worker.stats.processed == 1
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.size, info.leased) == (1, 0)  # the second was never taken
    assert service.peek(fdbqueue_db, queue).value == "second"


def test_abort_releases_the_item_in_progress_at_once(fdbqueue_db, queue, worker_factory, caplog):
    service.push(fdbqueue_db, queue, "held")
    started, finish = threading.Event(), threading.Event()

    def handler(item):
        started.set()
        finish.wait(DEADLINE)

    worker = worker_factory(queue, handler, lease=30)
    with caplog.at_level(logging.INFO, logger="django_fdbqueue.worker"):
        worker.start()
        assert started.wait(DEADLINE)
        worker.stop()
        worker.abort()
        assert worker.wait(2)  # does not wait for the handler
        assert worker.stats.released == 1
        back = service.peek(fdbqueue_db, queue)
        assert back is not None and back.value == "held" and back.attempts == 1
        finish.set()  # the handler ends after all: its result is ignored, nothing is acked
        wait_until(lambda: "result ignored" in caplog.text)
    assert worker.stats.processed == 0
    assert service.get_queue(fdbqueue_db, queue).size == 1


def test_store_errors_are_retried_not_fatal(fdbqueue_db, queue, worker_factory, monkeypatch, caplog):
    service.push(fdbqueue_db, queue, "eventually")
    real_claim = service.claim
    failures = []

    def flaky_claim(*args, **kwargs):
        if len(failures) < 2:
            failures.append(1)
            raise make_error(1031)  # transaction_timed_out
        return real_claim(*args, **kwargs)

    monkeypatch.setattr(service, "claim", flaky_claim)
    done = threading.Event()
    worker = worker_factory(queue, lambda item: done.set())
    with caplog.at_level(logging.WARNING, logger="django_fdbqueue.worker"):
        worker.start()
        assert done.wait(DEADLINE)
    wait_until(lambda: worker.stats.processed == 1)
    worker.stop()
    assert worker.wait(DEADLINE)
    assert worker.stats.store_errors == 2
    assert "1031" in caplog.text


def _ack_fails_once(monkeypatch, fdbqueue_db, first_attempt):
    """service.ack whose first call runs ``first_attempt(receipt, name)`` and then fails with 1031."""
    real_ack, calls = service.ack, []

    def ack(db, receipt, *, name=None):
        calls.append(receipt)
        if len(calls) == 1:
            first_attempt(receipt, name)
            raise make_error(1031)  # transaction_timed_out: did the ack happen? the worker cannot know
        return real_ack(db, receipt, name=name)

    monkeypatch.setattr(service, "ack", ack)
    return calls


def _handle_one(worker, started, finish):
    worker.start()
    assert started.wait(DEADLINE)
    worker.stop()  # the item may come back: this worker must not take it again
    finish.set()
    assert worker.wait(DEADLINE)


def test_a_retried_ack_that_finds_the_item_still_queued_counts_it_lost(
    fdbqueue_db, queue, worker_factory, monkeypatch, caplog
):
    """Suspect 5b, confirmed: a retried ack finding LeaseNotFound was counted processed, although
    the failed attempt had not acked (the lease was taken away meanwhile) and the item runs again."""
    service.push(fdbqueue_db, queue, "taken away")
    started, finish = threading.Event(), threading.Event()

    def handler(item):
        started.set()
        assert finish.wait(DEADLINE)

    def released_meanwhile(receipt, name):  # as `manage.py fdbqueue release RECEIPT` would
        service.release(fdbqueue_db, receipt, name=name)

    calls = _ack_fails_once(monkeypatch, fdbqueue_db, released_meanwhile)
    worker = worker_factory(queue, handler, lease=10)
    with caplog.at_level(logging.INFO, logger="django_fdbqueue.worker"):
        _handle_one(worker, started, finish)
    assert len(calls) == 2
    assert (worker.stats.processed, worker.stats.lost, worker.stats.store_errors) == (0, 1, 1)
    assert "It is or will be delivered again" in caplog.text and "earlier attempt applied" not in caplog.text
    back = service.peek(fdbqueue_db, queue)
    assert back is not None and back.value == "taken away"  # not acknowledged: it runs again


def test_a_retried_ack_whose_first_attempt_applied_counts_it_processed(
    fdbqueue_db, queue, worker_factory, monkeypatch, caplog
):
    service.push(fdbqueue_db, queue, "acked")
    started, finish = threading.Event(), threading.Event()

    def handler(item):
        started.set()
        assert finish.wait(DEADLINE)

    real_ack = service.ack

    def applied(receipt, name):  # the ack committed, but its answer was lost
        real_ack(fdbqueue_db, receipt, name=name)

    _ack_fails_once(monkeypatch, fdbqueue_db, applied)
    worker = worker_factory(queue, handler, lease=10)
    with caplog.at_level(logging.INFO, logger="django_fdbqueue.worker"):
        _handle_one(worker, started, finish)
    assert (worker.stats.processed, worker.stats.lost) == (1, 0)
    # The service answered the retried ack itself, from the first attempt's settled marker.
    assert "delivered again" not in caplog.text
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.size, info.leased) == (0, 0)


# --- burst mode -------------------------------------------------------------------------------


def test_a_burst_ends_once_nothing_is_ready_and_nothing_in_hand(fdbqueue_db, queue, worker_factory):
    """The item in hand pushes another: the burst waits for it and runs that too."""
    service.push(fdbqueue_db, queue, "first")
    started, finish = threading.Event(), threading.Event()
    handled = []

    def handler(item):
        if item.value == "first":
            started.set()
            assert finish.wait(DEADLINE)
            service.push(fdbqueue_db, queue, "second")
        handled.append(item.value)

    worker = worker_factory(queue, handler, concurrency=2, burst=True)
    worker.start()
    assert started.wait(DEADLINE)
    assert not worker.wait(0.3)  # the other thread found nothing, but an item is in hand
    finish.set()
    assert worker.wait(DEADLINE)
    assert sorted(handled) == ["first", "second"] and worker.stats.processed == 2
    assert service.get_queue(fdbqueue_db, queue).size == 0


def test_a_burst_does_not_wait_for_delayed_items(fdbqueue_db, queue, worker_factory):
    service.push(fdbqueue_db, queue, "later", delay=3600)
    service.push(fdbqueue_db, queue, "fails")
    service.push(fdbqueue_db, queue, "works")
    handled = []

    def handler(item):
        handled.append(item.value)
        if item.value == "fails":
            raise RuntimeError("released with a back-off, so delayed")

    worker = worker_factory(queue, handler, burst=True, base_backoff=60, max_backoff=60)
    worker.start()
    assert worker.wait(DEADLINE)
    assert handled == ["fails", "works"]
    assert (worker.stats.processed, worker.stats.failed) == (1, 1)
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.delayed, info.leased) == (2, 0)


def test_worker_refuses_bad_settings(fdbqueue_db, queue):
    def handler(item):
        return None

    for options in (
        {"lease": 0},
        {"lease": 50_000},
        {"lease": float("nan")},
        {"concurrency": 0},
        {"concurrency": True},
        {"end": "middle"},
        {"poll_wait": 0},
        {"max_backoff": -1},
    ):
        with pytest.raises(InvalidArgument):
            Worker(fdbqueue_db, queue, handler, **options)
    with pytest.raises(InvalidArgument):
        Worker(fdbqueue_db, queue, "not callable")
    with pytest.raises(WrongQueueKind):
        Worker(fdbqueue_db, queue, handler, end="max").start()
    with pytest.raises(QueueNotFound):
        Worker(fdbqueue_db, "missing", handler).start()


# --- a consumer process killed while it holds a lease -----------------------------------------


def _hold_and_hang(setting: dict, name: str, conn) -> None:
    """Child: a worker whose handler reports its item, then hangs until the child is killed."""
    from django_fdbqueue.worker import Worker as ChildWorker

    db = child_database(setting)

    def handler(item):
        conn.send((item.id, item.attempts))
        time.sleep(DEADLINE * 3)

    ChildWorker(db, name, handler, lease=1.5, poll_wait=0.2).run()


def test_an_item_held_by_a_killed_process_is_delivered_again(fdbqueue_db, queue):
    pushed = service.push(fdbqueue_db, queue, {"important": True})
    ctx = multiprocessing.get_context("spawn")
    parent_end, child_end = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_hold_and_hang, args=(dict(django_settings.FDBQUEUE), queue, child_end), daemon=True)
    child.start()
    try:
        assert parent_end.poll(60), "the child never claimed the item"
        assert parent_end.recv() == (pushed.id, 1)
        # Its heartbeat keeps the item hidden beyond the first 1.5 s lease: the lease's end moves
        # on (seen in the store, not guessed from a sleep), and the item stays leased, once.
        (first,) = service.scheduled(fdbqueue_db, queue).items
        wait_until(lambda: service.scheduled(fdbqueue_db, queue).items[0].visible_at > first.visible_at)
        (held,) = service.scheduled(fdbqueue_db, queue).items
        assert (held.state, held.item.id, held.item.attempts) == ("leased", pushed.id, 1)
        os.kill(child.pid, signal.SIGKILL)
        child.join(DEADLINE)
        assert child.exitcode == -signal.SIGKILL
        # No heartbeat any more: within about a lease, the item comes back to the next claim.
        lease = service.claim(fdbqueue_db, queue, lease=5, wait=DEADLINE)
        assert lease is not None, "the item was lost"
        assert (lease.item.id, lease.item.value, lease.item.attempts) == (pushed.id, {"important": True}, 2)
        service.ack(fdbqueue_db, lease.receipt, name=queue)
        info = service.get_queue(fdbqueue_db, queue)
        assert (info.size, info.leased, info.dead) == (0, 0, 0)
    finally:
        kill_leftovers([child])


# --- manage.py fdbqueue worker, in a real process ---------------------------------------------


@pytest.fixture
def worker_process(fdbqueue_db, tmp_path):
    """Start ``python -m django fdbqueue worker ...`` on the test's store; killed after the test."""
    settings_dir = tmp_path / "settings"
    settings_dir.mkdir()
    (settings_dir / "worker_test_settings.py").write_text(
        textwrap.dedent(
            f"""
            from tests.settings import *  # noqa: F401,F403

            FDBQUEUE = {dict(django_settings.FDBQUEUE)!r}
            """
        ),
        encoding="utf-8",
    )
    files = tmp_path / "handshake"
    files.mkdir()
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "worker_test_settings"
    env["PYTHONPATH"] = os.pathsep.join([str(settings_dir), str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env["FDBQUEUE_WORKER_TEST_DIR"] = str(files)
    started: list[subprocess.Popen] = []

    def start(*args: str) -> tuple[subprocess.Popen, Path, Path]:
        out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "django", "fdbqueue", "worker", *args],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=str(tmp_path),
            )
        started.append(process)
        return process, out, err

    start.files = files
    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE)


def _log(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _sigterm_mid_item(worker_process, queue: str, lease: str) -> tuple[subprocess.Popen, Path, Path, Path]:
    """Start the command on a handler that waits for a go-ahead; once it holds item 1, send SIGTERM
    and wait until the command says it got it. Returns the process, its stdout and stderr files,
    and the handshake folder (write "go" there to let the handler finish)."""
    process, out, err = worker_process(
        queue, "--handler", "tests.worker_handlers.wait_for_go", "--lease", lease, "--json"
    )
    files = worker_process.files
    wait_until(lambda: (files / "started-1").exists() or process.poll() is not None, 60)
    assert process.poll() is None, _log(err)

    process.send_signal(signal.SIGTERM)
    wait_until(lambda: "Received SIGTERM" in _log(err) or process.poll() is not None)
    return process, out, err, files


def test_the_command_finishes_its_item_on_sigterm_and_exits_0(fdbqueue_db, queue, worker_process):
    service.push(fdbqueue_db, queue, {"n": 1})
    service.push(fdbqueue_db, queue, {"n": 2})
    process, out, err, files = _sigterm_mid_item(worker_process, queue, lease="5")
    (files / "go").write_text("")  # only now may the handler finish
    assert process.wait(DEADLINE) == 0, _log(err)

    summary = json.loads(out.read_text())
    assert summary["processed"] == 1 and summary["failed"] == 0 and summary["released"] == 0
    assert (files / "done-1").exists() and not (files / "started-2").exists()
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.size, info.leased) == (1, 0)  # item 1 acked, item 2 never taken
    assert service.peek(fdbqueue_db, queue).value == {"n": 2}
    log = _log(err)
    assert "Worker started on queue 'jobs'" in log and "1 processed" in log
    assert "Traceback" not in log


def test_the_command_with_burst_processes_what_is_ready_and_exits_0(fdbqueue_db, queue, worker_process):
    for n in (1, 2, 3):
        service.push(fdbqueue_db, queue, {"n": n})
    service.push(fdbqueue_db, queue, {"n": 4}, delay=3600)
    process, out, err = worker_process(
        queue, "--handler", "tests.worker_handlers.record", "--burst", "--concurrency", "2", "--json"
    )
    assert process.wait(DEADLINE) == 0, _log(err)
    summary = json.loads(out.read_text())
    assert (summary["processed"], summary["failed"], summary["lost"], summary["released"]) == (3, 0, 0, 0)
    files = worker_process.files
    assert sorted(path.name for path in files.glob("handled-*")) == ["handled-1", "handled-2", "handled-3"]
    info = service.get_queue(fdbqueue_db, queue)
    assert (info.delayed, info.leased) == (1, 0)  # not due: not waited for
    assert "burst over" in _log(err)


def test_the_command_prints_a_line_per_item_at_its_default_verbosity(fdbqueue_db, queue, worker_process):
    """The tutorial says the worker takes a task at once: at verbosity 1 each item shows as it
    goes, not only in the summary at the end."""
    ids = [service.push(fdbqueue_db, queue, {"n": n}).id for n in (1, 2)]
    process, _out, err = worker_process(queue, "--handler", "tests.worker_handlers.record", "--burst")
    assert process.wait(DEADLINE) == 0, _log(err)
    for item_id in ids:
        assert f"INFO django_fdbqueue.worker: Processed item {item_id} of queue 'jobs' (attempt 1)." in _log(err)


def test_a_second_sigterm_releases_the_item_and_exits(fdbqueue_db, queue, worker_process):
    service.push(fdbqueue_db, queue, {"n": 1})
    process, out, err, files = _sigterm_mid_item(worker_process, queue, lease="30")
    process.send_signal(signal.SIGTERM)
    assert process.wait(DEADLINE) == 0, _log(err)  # without the go-ahead: the handler never ended

    back = service.peek(fdbqueue_db, queue)  # back at once, not after the 30 s lease
    assert back is not None and back.value == {"n": 1} and back.attempts == 1
    assert not (files / "done-1").exists()
    summary = json.loads(out.read_text())
    assert summary["released"] == 1 and summary["processed"] == 0
