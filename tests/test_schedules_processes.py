"""Exactly once with several scheduler processes on one store, driven by a fake clock.

Three spawned processes each run a :class:`Scheduler` whose clock is a shared value the test
advances in random steps. After each step the test waits (bounded) until every schedule's
next run is past the clock, so every occurrence up to then has been fired by someone. At the end
each process reports the occurrences it fired: together they must be exactly the schedule's
occurrences, none twice, none missing, and each queue must hold one item per occurrence.
"""

from __future__ import annotations

import multiprocessing
import random
import time

from django.conf import settings as django_settings

from django_fdbqueue import schedules, service
from django_fdbqueue.schedules import model
from tests.processes import child_database, join_all, kill_leftovers

PROCESSES = 3
STEPS = 80
DEADLINE = 60
S = 1_000_000
DEFINITIONS = {  # name: (queue, trigger, catch_up); every step is shorter than C's interval
    "a": ({"interval": 10}, "all"),
    "b": ({"cron": "* * * * *"}, "all"),
    "c": ({"interval": 13, "tz": "America/New_York"}, "last"),
}


def _scheduler_main(setting: dict, clock, ready, stop, results) -> None:
    try:
        db = child_database(setting)
        scheduler = schedules.Scheduler(db, clock=lambda: clock.value, max_wait=0.02, stop=stop, sync=False)
        ready.wait(DEADLINE)
        fired = scheduler.run()
        results.put([(f.name, f.occurrences) for f in fired])
    except BaseException as exc:  # the parent fails the test with this
        results.put(("error", repr(exc)))


def _settled(db, now_us: int) -> bool:
    return all(s.next_run_us > now_us for s in schedules.list_schedules(db))


def _expected(schedule: schedules.Schedule, first_us: int, until_us: int) -> list[int]:
    found, moment = [], first_us
    while moment <= until_us:
        found.append(moment)
        moment = model.next_after(schedule, moment)
    return found


def _drive(db, clock, rng) -> None:
    for _ in range(STEPS):
        clock.value += rng.randint(1 * S, 9 * S)
        deadline = time.monotonic() + DEADLINE
        while not _settled(db, clock.value):
            assert time.monotonic() < deadline, "the schedulers did not fire what was due"
            time.sleep(0.01)


def test_three_scheduler_processes_fire_every_occurrence_exactly_once(fdbqueue_db):
    db = fdbqueue_db
    created = {}
    for name, (trigger, catch_up) in DEFINITIONS.items():
        service.create_queue(db, name, kind="fifo")
        target = {"kind": "push", "queue": name, "value": name}
        created[name] = schedules.create(db, name, target, catch_up=catch_up, **trigger)
    ctx = multiprocessing.get_context("spawn")
    clock = ctx.Value("q", max(s.anchor_us for s in created.values()))
    ready, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
    setting = dict(django_settings.FDBQUEUE)
    procs = [
        ctx.Process(target=_scheduler_main, args=(setting, clock, ready, stop, results), daemon=True)
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    try:
        ready.set()
        _drive(db, clock, random.Random(20))
        stop.set()
        reports = [results.get(timeout=DEADLINE) for _ in procs]
        join_all(procs, DEADLINE)
    finally:
        stop.set()
        kill_leftovers(procs)
    assert all(report and report[0] != "error" for report in reports if report), reports
    fired: dict[str, list[int]] = {name: [] for name in DEFINITIONS}
    for report in reports:
        for name, occurrences in report:
            fired[name].extend(occurrences)
    for name, schedule in created.items():
        expected = _expected(schedule, schedule.next_run_us, clock.value)
        assert sorted(fired[name]) == expected, name  # none twice, none skipped
        assert service.size(db, name) == len(expected) > 0
    print({name: len(times) for name, times in fired.items()}, [sum(len(o) for _, o in report) for report in reports])
