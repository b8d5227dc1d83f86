"""An operation that finished before another began is visible to it, whoever ran it.

On a cluster, pops and claims start from the read version of this thread's last commit instead
of asking for a new one (``fdbapi``'s read-version reuse). That is only sound if whatever another
client committed since that version either shows or makes the claim conflict and run again. So
the matrix: each of push, a delayed push (read once due), release, ack, delete and a limit change, run by this thread, another
thread or another process, then each of pop, claim, peek and size in this thread, on a plain
priority queue, on one with per-key limits and on one split by tenant. ``REUSE_VERSION_SECONDS`` is lifted so that every
cell really starts from a reused version however slow the machine (a version too old for the
cluster only costs a retry at a fresh one), and the cluster cells check that one was reused.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from django.conf import settings as django_settings

from django_fdbqueue import service
from django_fdbqueue.fdbapi import retrying
from django_fdbqueue.exceptions import QueueNotFound

from .processes import child_database, kill_leftovers

REPLY_SECONDS = 120
FLAVORS = {"plain": {}, "limited": {"key_concurrency": 1}, "tenants": {"tenants": True}}
READS = ("pop", "claim", "peek", "size")
#: A delayed push's delay: the matrix waits (polling, bounded) until the item is due.
DELAY_SECONDS = 0.2


# --- what another client does (module-level, so a spawned process can run them by name) -----------


def _push(db: Any, name: str, value: str, priority: int, key: str, tenant: str | None) -> None:
    service.push(db, name, value, priority=priority, key=key, tenant=tenant)


def _push_later(db: Any, name: str, value: str, priority: int, key: str, tenant: str | None) -> None:
    service.push(db, name, value, priority=priority, key=key, tenant=tenant, delay=DELAY_SECONDS)


def _release(db: Any, name: str, receipt: str) -> None:
    service.release(db, receipt, name=name)


def _ack(db: Any, name: str, receipt: str) -> None:
    service.ack(db, receipt, name=name)


def _delete(db: Any, name: str) -> None:
    service.delete_queue(db, name)


def _set_limit(db: Any, name: str, concurrency: int) -> None:
    service.set_key_limits(db, name, concurrency=concurrency)


ACTIONS: dict[str, Callable[..., None]] = {
    "push": _push,
    "push later": _push_later,
    "release": _release,
    "ack": _ack,
    "delete": _delete,
    "limit": _set_limit,
}


def _child(setting: dict, conn: Any) -> None:
    """Run the parent's actions one at a time, answering each when it has committed."""
    db = child_database(setting)
    conn.send(("ready", None))
    while True:
        order = conn.recv()
        if order is None:
            return
        action, args = order
        try:
            ACTIONS[action](db, *args)
            conn.send(("ok", None))
        except Exception as error:  # noqa: BLE001 - reported to the parent
            conn.send(("error", repr(error)))


class _OtherProcess:
    def __init__(self, setting: dict) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_end = ctx.Pipe()
        self.process = ctx.Process(target=_child, args=(setting, child_end), daemon=True)
        self.process.start()
        self._answer()

    def _answer(self) -> None:
        assert self.conn.poll(REPLY_SECONDS), "the other process did not answer"
        status, detail = self.conn.recv()
        assert status in ("ok", "ready"), detail

    def run(self, db: Any, action: str, *args: Any) -> None:
        self.conn.send((action, args))
        self._answer()

    def close(self) -> None:
        self.conn.send(None)
        self.process.join(REPLY_SECONDS)
        kill_leftovers([self.process])


class _OtherThread:
    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1)

    def run(self, db: Any, action: str, *args: Any) -> None:
        self.pool.submit(ACTIONS[action], db, *args).result(timeout=REPLY_SECONDS)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class _SameThread:
    def run(self, db: Any, action: str, *args: Any) -> None:
        ACTIONS[action](db, *args)

    def close(self) -> None:
        pass


# --- the scenarios ---------------------------------------------------------------------------------


@dataclass
class Scenario:
    """``setup`` fills the queue and returns the arguments of ``action``; ``expected`` per read."""

    action: str
    setup: Callable[[Any, str, str], tuple]
    expected: Callable[[str], dict[str, Any]]
    delayed: bool = False  #: the action's item comes due DELAY_SECONDS after it returns


def _until_due(seconds: float) -> None:
    """Wait out a delay by the clock the service stamps with, without a commit (or any
    transaction) of this thread's: those would move the version the next read starts from."""
    due = time.time() + seconds
    while time.time() < due:
        threading.Event().wait(due - time.time())


def _tenant(flavor: str) -> str | None:
    return "t" if flavor == "tenants" else None


def _fill(db: Any, name: str, flavor: str, *items: tuple[str, int, str]) -> None:
    for value, priority, key in items:
        _push(db, name, value, priority, key, _tenant(flavor))


def _claimed(db: Any, name: str, value: str) -> str:
    lease = service.claim(db, name, lease=600)
    assert lease is not None and lease.item.value == value
    return lease.receipt


def _setup_push(db: Any, name: str, flavor: str) -> tuple:
    _fill(db, name, flavor, ("nine", 9, "n"))
    return (name, "one", 1, "p", _tenant(flavor))


def _setup_release(db: Any, name: str, flavor: str) -> tuple:
    _fill(db, name, flavor, ("a", 5, "a"), ("b", 5, "b"))
    return (name, _claimed(db, name, "a"))


def _setup_ack(db: Any, name: str, flavor: str) -> tuple:
    _fill(db, name, flavor, ("a", 5, "k"), ("c", 5, "k"), ("b", 5, "b"))
    return (name, _claimed(db, name, "a"))


def _setup_delete(db: Any, name: str, flavor: str) -> tuple:
    _fill(db, name, flavor, ("a", 5, "a"))
    return (name,)


def _setup_limit(db: Any, name: str, flavor: str) -> tuple:
    _fill(db, name, flavor, ("a", 5, "k"), ("c", 5, "k"), ("b", 5, "b"))
    _claimed(db, name, "a")
    return (name, 2 if flavor == "limited" else 1)  # limited: 1 -> 2; plain: none -> 1


GONE = QueueNotFound
SCENARIOS = {
    "push": Scenario("push", _setup_push, lambda f: {"pop": "one", "claim": "one", "peek": "one", "size": 2}),
    # A due item enters the counted items when a pop or claim moves it in: size is still 1. A
    # tenant queue's peek shows the front tenant's ready item and does not look at due ones.
    "push later": Scenario(
        "push later",
        _setup_push,
        delayed=True,
        expected=lambda f: {"pop": "one", "claim": "one", "peek": "nine" if f == "tenants" else "one", "size": 1},
    ),
    "release": Scenario("release", _setup_release, lambda f: {"pop": "a", "claim": "a", "peek": "a", "size": 2}),
    "ack": Scenario("ack", _setup_ack, lambda f: {"pop": "c", "claim": "c", "peek": "c", "size": 2}),
    "delete": Scenario("delete", _setup_delete, lambda f: {"pop": GONE, "claim": GONE, "peek": GONE, "size": GONE}),
    # Pops ignore key limits; a claim takes "c" once its key may have two leases, "b" once one.
    "limit": Scenario(
        "limit", _setup_limit, lambda f: {"pop": "c", "claim": "c" if f == "limited" else "b", "peek": "c", "size": 2}
    ),
}


def _read(db: Any, name: str, what: str) -> Any:
    try:
        if what == "pop":
            got = service.pop(db, name)
        elif what == "claim":
            got = service.claim(db, name, lease=600)
            got = got.item if got is not None else None
        elif what == "peek":
            got = service.peek(db, name)
        else:
            return service.size(db, name)
    except QueueNotFound:
        return GONE
    return got.value if got is not None else None


def _run_matrix(db: Any, actor: Any, engine_name: str) -> list[str]:
    wrong = []
    n = 0
    for scenario in SCENARIOS.values():
        for flavor, options in FLAVORS.items():
            if scenario.action == "limit" and flavor == "tenants":
                continue  # a queue split by tenant has no per-key limits
            for what in READS:
                n += 1
                name = f"m{n}"
                service.create_queue(db, name, kind="priority", **options)
                args = scenario.setup(db, name, flavor)
                service.push(db, "side", "x")  # this thread's last commit: older than the action
                actor.run(db, scenario.action, *args)
                if scenario.delayed:
                    _until_due(DELAY_SECONDS)
                reused = getattr(retrying._last_commit, "seen", None) is not None
                if engine_name == "foundationdb" and not isinstance(actor, _SameThread):
                    assert reused, "the read would not start from a reused version"
                got = _read(db, name, what)
                want = scenario.expected(flavor)[what]
                if got != want:
                    wrong.append(f"{scenario.action} then {what} on a {flavor} queue: {got!r}, expected {want!r}")
    return wrong


@pytest.fixture
def reused_versions(monkeypatch):
    """Every pop and claim after a commit of this thread starts from that commit's version."""
    monkeypatch.setattr(retrying, "REUSE_VERSION_SECONDS", float("inf"))
    retrying._last_commit.seen = None
    yield
    retrying._last_commit.seen = None


@pytest.mark.parametrize("who", ["same thread", "other thread", "other process"])
def test_what_finished_before_is_visible(fdbqueue_db, engine_name, reused_versions, who):
    db = fdbqueue_db
    service.create_queue(db, "side", kind="fifo")
    if who == "same thread":
        actor: Any = _SameThread()
    elif who == "other thread":
        actor = _OtherThread()
    else:
        actor = _OtherProcess(dict(django_settings.FDBQUEUE))
    try:
        wrong = _run_matrix(db, actor, engine_name)
    finally:
        actor.close()
    assert not wrong, "\n".join(wrong)


def test_the_matrix_covers_every_pair():
    """Six actions, four reads, three kinds of queue: each pair has an expected answer."""
    for scenario in SCENARIOS.values():
        for flavor in FLAVORS:
            assert set(scenario.expected(flavor)) == set(READS)
    assert set(SCENARIOS) == set(ACTIONS)


class _StepFailed(Exception):
    pass


def test_a_claims_step_that_raises_runs_once_at_a_reused_version(fdbqueue_db, engine_name, reused_versions):
    """The docs promise an exception of the step fails the claim: it must not be run again at a
    fresh version as if the reused one had found nothing (the step's side effects would double)."""
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    service.push(db, "jobs", "a")  # this thread's last commit: the claim starts from its version
    if engine_name == "foundationdb":
        assert getattr(retrying._last_commit, "seen", None) is not None
    calls = []

    def step(tr: Any, lease: Any) -> None:
        calls.append(lease.item.value)
        raise _StepFailed("the step refuses")

    with pytest.raises(_StepFailed):
        service.claim(db, "jobs", step=step)
    assert calls == ["a"]
    assert service.size(db, "jobs") == 1  # nothing of the failed claim committed
    lease = service.claim(db, "jobs")
    assert lease is not None and lease.item.value == "a" and lease.item.attempts == 1
