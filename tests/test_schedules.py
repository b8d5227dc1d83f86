"""Periodic schedules in Python: definitions, occurrences, catch-up policies, exactly-once firing
under conflicts and commit_unknown_result, run_now, declarations, and tasks as targets."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest

from django_fdbqueue import schedules, service
from django_fdbqueue.exceptions import (
    InvalidArgument,
    InvalidSchedule,
    ScheduleAlreadyExists,
    ScheduleNotFound,
)
from django_fdbqueue.schedules import registry as declaring
from django_fdbqueue.schedules import firing, model, store
from django_fdbqueue.tasks import results

S = 1_000_000
PUSH = {"kind": "push", "queue": "jobs", "value": {"job": "report"}}


@pytest.fixture
def db(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    return fdbqueue_db


def every(db, seconds, catch_up="last", name="tick", **options):
    return schedules.create(db, name, PUSH, interval=seconds, catch_up=catch_up, **options)


def items(db, queue="jobs"):
    return service.size(db, queue)


# --- definitions and bad input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, field",
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "every day"}, "cron"),
        ({"cron": ""}, "cron"),
        ({"interval": 0}, "interval"),
        ({"interval": -5}, "interval"),
        ({"interval": float("nan")}, "interval"),
        ({"interval": True}, "interval"),
        ({"cron": "* * * * *", "interval": 5}, "cron"),
        ({}, "cron"),
        ({"interval": 5, "tz": "Mars/Olympus_Mons"}, "tz"),
        ({"interval": 5, "tz": ""}, "tz"),
        ({"interval": 5, "catch_up": "some"}, "catch_up"),
    ],
)
def test_bad_definitions_are_refused_and_store_nothing(db, options, field):
    with pytest.raises(InvalidSchedule) as raised:
        schedules.create(db, "bad", PUSH, **options)
    assert raised.value.context["field"] == field and raised.value.message
    assert schedules.list_schedules(db) == []


@pytest.mark.parametrize(
    "name, target",
    [
        ("", PUSH),
        ("a b", PUSH),
        ("x" * 101, PUSH),
        ("ok", {"kind": "mail"}),
        ("ok", {"kind": "push", "queue": "bad name"}),
        ("ok", {"kind": "push", "queue": "jobs", "value": {1, 2}}),
        ("ok", {"kind": "push", "queue": "jobs", "priority": "high"}),
        ("ok", {"kind": "task", "task": "not a path"}),
        ("ok", {"kind": "task", "task": "tests.task_functions.add", "args": "1, 2"}),
    ],
)
def test_bad_names_and_targets_are_refused(db, name, target):
    with pytest.raises(InvalidArgument):
        schedules.create(db, name, target, interval=5)
    assert schedules.list_schedules(db) == []


def test_a_bad_update_changes_nothing(db):
    before = every(db, 60)
    for changes in ({"cron": "nope"}, {"tz": "Nowhere/Land"}, {"catch_up": "most"}, {"interval": 0}, {"paused": True}):
        with pytest.raises(InvalidArgument):
            schedules.update(db, "tick", **changes)
    assert schedules.get(db, "tick") == before


def test_create_get_list_update_delete(db):
    created = schedules.create(db, "nightly", PUSH, cron="30 2 * * *", tz="Europe/Paris", catch_up="none")
    with pytest.raises(ScheduleAlreadyExists):
        schedules.create(db, "nightly", PUSH, cron="0 3 * * *")
    assert schedules.get(db, "nightly") == created
    local = model._local(created.next_run_us, "Europe/Paris")
    assert (local.hour, local.minute) == (2, 30)
    changed = schedules.update(db, "nightly", interval=600)
    assert (changed.cron, changed.interval, changed.catch_up) == (None, 600.0, "none")
    assert [s.name for s in schedules.list_schedules(db)] == ["nightly"]
    assert schedules.delete(db, "nightly") is True and schedules.delete(db, "nightly") is False
    with pytest.raises(ScheduleNotFound):
        schedules.get(db, "nightly")


def test_cron_follows_the_time_zone_across_daylight_saving():
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    schedule = model.make("x", PUSH, cron="0 9 * * *", tz="Europe/Paris")
    before = model._micros(dt.datetime(2026, 3, 27, 10, 0, tzinfo=paris))
    first = model.next_after(schedule, before)
    second = model.next_after(schedule, first)
    assert model._local(first, "Europe/Paris").hour == model._local(second, "Europe/Paris").hour == 9
    assert second - first == 23 * 3600 * S  # the night the clocks go forward is an hour short


# --- firing and catch-up ---------------------------------------------------------------------------------


def test_due_schedules_fire_once_and_advance(db):
    tick = every(db, 10)
    assert schedules.fire_due(db, tick.next_run_us - 1) == []
    (fired,) = schedules.fire_due(db, tick.next_run_us)
    assert fired.occurrences == [tick.next_run_us] and fired.result["status"] == "ok"
    assert schedules.fire_due(db, tick.next_run_us) == []  # already advanced
    after = schedules.get(db, "tick")
    assert after.next_run_us == tick.next_run_us + 10 * S and after.last_run_us == tick.next_run_us
    assert after.last_result["item"] == service.peek(db, "jobs").id
    assert items(db) == 1


@pytest.mark.parametrize("catch_up, fired", [("last", 1), ("all", 5), ("none", 0)])
def test_catch_up_policies(db, catch_up, fired):
    tick = every(db, 600, catch_up)
    late = tick.next_run_us + 4 * 600 * S + 2 * GRACE  # five occurrences due, the latest 2 minutes old
    (done,) = schedules.fire_due(db, late)
    assert len(done.occurrences) == fired == items(db)
    after = schedules.get(db, "tick")
    assert after.next_run_us == tick.next_run_us + 5 * 600 * S
    assert after.last_result["skipped"] is (catch_up != "all")
    if catch_up == "last":
        assert done.occurrences == [tick.next_run_us + 4 * 600 * S]
    if catch_up == "all":
        assert done.occurrences == [tick.next_run_us + k * 600 * S for k in range(5)]
    if catch_up == "none":
        assert after.last_result["status"] == "skipped" and after.last_run_us is None


GRACE = schedules.GRACE_SECONDS * S


def test_catch_up_none_fires_an_occurrence_on_time(db):
    tick = every(db, 600, "none")
    (done,) = schedules.fire_due(db, tick.next_run_us + GRACE // 2)
    assert done.occurrences == [tick.next_run_us] and items(db) == 1


def test_catch_up_all_is_bounded(db):
    tick = every(db, 1, "all")
    late = tick.next_run_us + 500 * S
    (done,) = schedules.fire_due(db, late)
    assert len(done.occurrences) == schedules.MAX_CATCH_UP == items(db)
    assert done.occurrences[-1] == late and done.result["skipped"] is True


def test_a_missing_queue_is_an_error_result_and_the_schedule_moves_on(db):
    tick = schedules.create(db, "lost", {"kind": "push", "queue": "nowhere", "value": 1}, interval=10)
    (done,) = schedules.fire_due(db, tick.next_run_us)
    after = schedules.get(db, "lost")
    assert done.result["status"] == "error" and "nowhere" in after.last_result["detail"]
    assert after.next_run_us == tick.next_run_us + 10 * S


def test_paused_schedules_do_not_fire_and_resume_from_the_next_occurrence(db):
    tick = every(db, 10)
    schedules.pause(db, "tick")
    assert schedules.fire_due(db, tick.next_run_us + 100 * S) == []
    resumed = schedules.resume(db, "tick")
    assert not resumed.paused and resumed.next_run_us > service.records.now_micros()


def test_run_now_fires_once_without_moving_next_run(db):
    tick = every(db, 3600)
    schedules.pause(db, "tick")
    done = schedules.run_now(db, "tick")
    after = schedules.get(db, "tick")
    assert done.result["status"] == "ok" and items(db) == 1
    assert after.next_run_us == tick.next_run_us and after.last_result["item"] == service.peek(db, "jobs").id
    with pytest.raises(ScheduleNotFound):
        schedules.run_now(db, "missing")


def test_two_schedulers_racing_fire_once(db):
    """The loser of the race conflicts, retries, and finds the schedule advanced."""
    tick = every(db, 10)
    tr = db.create_transaction()
    first = firing._fire(tr, "tick", tick.next_run_us)  # scheduler A, not committed yet
    second = firing.fire(db, "tick", tick.next_run_us)  # scheduler B commits first
    assert first is not None and second is not None
    with pytest.raises(Exception) as raised:
        tr.commit().wait()
    assert getattr(raised.value, "code", None) == 1020
    assert firing._fire(db, "tick", tick.next_run_us) is None  # A's retry: nothing due
    assert items(db) == 1


# --- commit_unknown_result ------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied", "not_committed"])
def test_1021_at_the_firing_commit_fires_once(db, faults, fault):
    tick = every(db, 10, "all")
    faults.fail_next(fault)
    schedules.fire_due(db, tick.next_run_us + 25 * S)  # after "unknown_applied", the retry fires nothing
    assert faults.injected[fault] == 1
    assert items(db) == 3
    assert schedules.get(db, "tick").next_run_us == tick.next_run_us + 30 * S


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_1021_at_run_now_fires_once(db, faults, fault):
    every(db, 3600)
    faults.fail_next(fault)
    schedules.run_now(db, "tick")
    assert faults.injected[fault] == 1 and items(db) == 1


def test_random_faults_fire_every_occurrence_once(db, faults):
    tick = every(db, 10, "all")
    faults.configure(not_committed=0.15, unknown_applied=0.15, unknown_not_applied=0.15, seed=20)
    now = tick.next_run_us
    for _ in range(30):
        schedules.fire_due(db, now)
        now += 10 * S
    injected = dict(faults.injected)
    faults.disable()
    assert injected["unknown_applied"] and injected["unknown_not_applied"]
    assert items(db) == 30 and schedules.get(db, "tick").next_run_us == now


# --- declarations ---------------------------------------------------------------------------------------


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(declaring, "_registry", {})
    return declaring


def test_declared_schedules_sync_create_then_update_keeping_state(db, registry):
    schedules.declare("report", queue="jobs", value={"r": 1}, interval=60)
    assert schedules.sync(db) == ["report"] and schedules.sync(db) == []
    first = schedules.get(db, "report")
    schedules.fire(db, "report", first.next_run_us)
    schedules.pause(db, "report")
    schedules.declare("report", queue="jobs", value={"r": 2}, interval=60)
    assert schedules.sync(db) == ["report"]
    after = schedules.get(db, "report")
    assert after.target["value"] == {"r": 2} and after.paused and after.last_run_us == first.next_run_us
    assert after.next_run_us == first.next_run_us + 60 * S  # same trigger: same timetable


@pytest.mark.parametrize("same_definition", [True, False])
def test_the_sync_takes_over_a_schedule_made_under_a_declared_name(db, registry, same_definition):
    """Issue 36: someone who may manage some queue created, and paused, a schedule under a name
    the code declares before the scheduler's first sync; the sync kept it paused (and, with the
    same definition, did not even mark it declared). The code's schedule now replaces it."""
    service.create_queue(db, "elsewhere", kind="fifo")
    schedules.declare("report", queue="jobs", value={"r": 1}, interval=60)
    value = {"r": 1} if same_definition else {"r": "theirs"}
    queue = "jobs" if same_definition else "elsewhere"
    schedules.create(db, "report", {"kind": "push", "queue": queue, "value": value}, interval=60)
    schedules.pause(db, "report")
    assert schedules.sync(db) == ["report"] and schedules.sync(db) == []
    taken = schedules.get(db, "report")
    assert taken.declared and not taken.paused and taken.target["queue"] == "jobs"
    assert taken.target["value"] == {"r": 1} and taken.next_run_us is not None
    assert schedules.fire_due(db, taken.next_run_us) and items(db) == 1


def test_declare_refuses_bad_input_at_once(registry):
    with pytest.raises(InvalidSchedule):
        schedules.declare("x", queue="jobs", cron="* * *")
    with pytest.raises(InvalidSchedule):
        schedules.declare("x", cron="* * * * *")
    assert schedules.declared() == []


def test_periodic_tasks_are_enqueued_through_the_backend(db, registry):
    from tests import task_functions as tf

    schedules.periodic("*/5 * * * *", name="adder", kwargs={"a": 2, "b": 3}, tz="Europe/Paris")(tf.add)
    (declared,) = schedules.declared()
    assert declared.target == {
        "kind": "task",
        "task": "tests.task_functions.add",
        "backend": "default",
        "args": [],
        "kwargs": {"a": 2, "b": 3},
    }
    schedules.sync(db)
    due = schedules.get(db, "adder").next_run_us
    (done,) = schedules.fire_due(db, due)
    record = results.get(db, done.result["task_result"])
    assert record.task_path == "tests.task_functions.add" and record.kwargs == {"a": 2, "b": 3}
    assert service.size(db, "tasks.default") == 1


def test_a_task_that_does_not_exist_is_an_error_result(db):
    schedules.create(db, "ghost", {"kind": "task", "task": "tests.task_functions.nothing_here"}, interval=5)
    done = schedules.run_now(db, "ghost")
    assert done.result["status"] == "error" and "nothing_here" in done.result["detail"]


@pytest.mark.parametrize("how", ["run_now", "fire"])
def test_a_task_target_failing_half_way_commits_nothing_of_it(db, how):
    """The task's queue refuses its item (a FIFO queue, a priority 5 task) after its result record
    was written in the firing transaction: that record must not commit (READY results never expire)."""
    service.create_queue(db, "tasks.emails", kind="fifo")
    shout = schedules.create(
        db, "shout", {"kind": "task", "task": "tests.task_functions.shout", "kwargs": {"text": "hi"}}, interval=60
    )
    done = schedules.run_now(db, "shout") if how == "run_now" else schedules.fire(db, "shout", shout.next_run_us)
    after = schedules.get(db, "shout")
    assert done.result["status"] == "error" and "FIFO" in done.result["detail"], done.result
    assert after.last_result["status"] == "error" and after.last_result["task_result"] is None
    assert results.counts(db, "default", "emails")[results.READY] == 0  # no orphan result record
    assert service.size(db, "tasks.emails") == 0
    expected_next = shout.next_run_us + 60 * S if how == "fire" else shout.next_run_us
    assert after.next_run_us == expected_next  # the occurrence is used up all the same


def test_list_limit_is_checked(db):
    with pytest.raises(InvalidArgument):
        store.list_schedules(db, limit=0)


# --- where the package sits ------------------------------------------------------------------------


@pytest.mark.parametrize("lower", ["service", "engines", "fdbapi", "clientlib", "conf", "exceptions", "codecs"])
def test_nothing_below_schedules_imports_it(lower):
    """schedules sits on the service: neither the service, the engines nor the foundations import it."""
    import grimp

    graph = grimp.build_graph("django_fdbqueue", exclude_type_checking_imports=True)
    assert not graph.find_shortest_chains(
        importer=f"django_fdbqueue.{lower}", imported="django_fdbqueue.schedules", as_packages=True
    )


def test_the_scheduler_loop_outlives_a_store_failure(db, monkeypatch):
    """A pass that fails with an FDBError is logged and retried after max_wait; the loop goes on."""
    import threading

    from django_fdbqueue.fdbapi import make_error
    from django_fdbqueue.schedules import scheduler as scheduler_module

    tick = every(db, 10)
    calls = []
    real = scheduler_module.firing.fire_due

    def flaky(database, now_us):
        calls.append(now_us)
        if len(calls) == 1:
            raise make_error(1031)
        stop.set()
        return real(database, now_us)

    monkeypatch.setattr(scheduler_module.firing, "fire_due", flaky)
    stop = threading.Event()
    loop = schedules.Scheduler(db, clock=lambda: tick.next_run_us, max_wait=0.01, stop=stop, sync=False)
    assert [f.name for f in loop.run()] == ["tick"] and len(calls) == 2
