"""Workers and the Tasks backend in high-contention claim mode (``claim_mode``, ``--claim-mode``,
``CLAIM_MODE``): exact order kept for many slots, the same at-least-once handling. Every test runs
on both engines."""

from __future__ import annotations

import threading

import pytest

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.service._internals import hcclaims
from django_fdbqueue.tasks.backend import FDBQueueBackend
from django_fdbqueue.tasks.compat import TaskResultStatus
from django_fdbqueue.tasks.runner import TaskWorkers, backend_named
from django_fdbqueue.worker import Worker

from . import task_functions as tf
from .cli_helpers import run

HC = "high-contention"


@pytest.fixture
def staged_claims(monkeypatch):
    """Every claim registers a request and is served by a round (no fast path), and the claims
    made are counted by mode."""
    real_arrive, real_claim, modes = hcclaims._arrive, service.claim, []
    monkeypatch.setattr(hcclaims, "_arrive", lambda db, c, stage=False: real_arrive(db, c, stage=True))

    def claim(db, name, **options):
        modes.append(options.get("mode", "plain"))
        return real_claim(db, name, **options)

    monkeypatch.setattr(service, "claim", claim)
    return modes


def test_a_worker_in_high_contention_mode_handles_every_item_once(fdbqueue_db, staged_claims):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    service.push_many(db, "jobs", [(n, 0) for n in range(40)])
    seen, lock = [], threading.Lock()

    def handle(item):
        with lock:
            seen.append(item.value)
        if item.value == 7 and item.attempts == 1:
            raise RuntimeError("fails once: the item comes back and is handled again")

    worker = Worker(db, "jobs", handle, concurrency=4, burst=True, claim_mode=HC, base_backoff=0.01)
    worker.run()
    assert sorted(seen) == sorted([*range(40), 7])
    assert (worker.stats.processed, worker.stats.failed) == (40, 1)
    assert set(staged_claims) == {HC}
    info = service.get_queue(db, "jobs")
    assert (info.size, info.leased) == (0, 0)


def test_a_worker_in_high_contention_mode_takes_items_in_queue_order(fdbqueue_db, staged_claims):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="priority")
    service.push_many(db, "jobs", [(f"p{p}-{n}", p) for n in range(3) for p in (2, 0, 1)])
    seen: list = []
    Worker(db, "jobs", lambda item: seen.append(item.value), burst=True, claim_mode=HC).run()
    assert seen == [f"p{p}-{n}" for p in (0, 1, 2) for n in range(3)]


def test_a_worker_refuses_an_unknown_mode_and_one_with_spread(fdbqueue_db):
    with pytest.raises(InvalidArgument, match="mode must be 'plain' or 'high-contention'"):
        Worker(fdbqueue_db, "jobs", print, claim_mode="fast")
    with pytest.raises(InvalidArgument, match="spread gives up exact order"):
        Worker(fdbqueue_db, "jobs", print, claim_mode=HC, spread=8)


def test_the_worker_command_takes_a_claim_mode_and_refuses_others(fdbqueue_db, staged_claims):
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    service.push_many(fdbqueue_db, "jobs", [(n, 0) for n in range(5)])
    done = run("worker", "jobs", "--handler", "json.dumps", "--claim-mode", HC, "--burst", "--concurrency", "2")
    assert done.code == 0, done.err
    assert service.get_queue(fdbqueue_db, "jobs").size == 0 and set(staged_claims) == {HC}
    bad = run("worker", "jobs", "--handler", "json.dumps", "--claim-mode", "fast", "--burst")
    assert bad.code == 2 and "invalid choice: 'fast'" in bad.err
    both = run("worker", "jobs", "--handler", "json.dumps", "--claim-mode", HC, "--spread", "4", "--burst")
    assert both.code != 0 and "spread gives up exact order" in both.err


def test_task_workers_claim_in_the_backend_s_mode(fdbqueue_db, monkeypatch, staged_claims):
    backend = backend_named("default")
    monkeypatch.setattr(backend, "claim_mode", HC)  # as OPTIONS {"CLAIM_MODE": "high-contention"} sets it
    results = [tf.add.enqueue(n, 1) for n in range(6)]
    group = TaskWorkers(backend, ["default"], concurrency=2, burst=True)
    assert {worker.claim_mode for worker in group.workers} == {HC}
    group.run()
    for n, result in enumerate(results):
        result.refresh()
        assert (result.status, result.return_value, result.attempts) == (TaskResultStatus.SUCCESSFUL, n + 1, 1)
    assert set(staged_claims) == {HC}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"CLAIM_MODE": "fast"}, "CLAIM_MODE must be 'plain' or 'high-contention', not 'fast'"),
        (
            {"CLAIM_MODE": HC, "CLAIM_SPREAD": 8},
            "CLAIM_MODE 'high-contention' keeps exact order and CLAIM_SPREAD gives it up: set one",
        ),
        (
            {"CLAIM_MODE": HC, "LIMIT_KEY_ARG": "user"},
            "CLAIM_MODE 'high-contention' does not claim from queues with key limits (LIMIT_KEY_ARG)",
        ),
    ],
)
def test_the_backend_checks_its_claim_mode(options, message):
    backend = FDBQueueBackend("default", {"QUEUES": ["default"], "OPTIONS": options})
    assert [m.msg for m in backend.check()] == [f"TASKS['default'] (FDBQueueBackend): {message}."]
    assert list(FDBQueueBackend("default", {"QUEUES": ["default"], "OPTIONS": {"CLAIM_MODE": HC}}).check()) == []
