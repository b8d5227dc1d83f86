"""Activity counters (``service.activity``): exact after a known sequence, bounded retention, and
the admin's JSON of them (shape and who may read it). Every test runs per engine."""

from __future__ import annotations

import pytest
from django.urls import reverse

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument, QueueNotFound
from django_fdbqueue.service import activity
from django_fdbqueue.service._internals.catalog import require
from django_fdbqueue.fdbapi import transactional

from .admin_helpers import PERMS, make_user
from .admin_helpers import client_for, op, operator  # noqa: F401 - fixtures, found by name


@pytest.fixture(autouse=True)
def _fresh_bucket_keys():
    activity.forget_process_state()  # the clock moves differently in each test
    yield
    activity.forget_process_state()


def last(series: dict, which: str, name: str | None = None):
    values = series["total"] if name is None else series["queues"][name]
    return values[which][-1]


def test_counters_are_exact_after_a_known_sequence(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo", max_attempts=2)
    service.create_queue(db, "other", kind="fifo")
    for i in range(5):
        service.push(db, "jobs", i)
    service.push(db, "other", "x")
    service.pop(db, "jobs")  # 0
    service.pop_many(db, "jobs", 2)  # 1, 2
    first = service.claim(db, "jobs", lease=60)  # 3
    service.ack(db, first.receipt)
    again = service.claim(db, "jobs", lease=60)  # 4, attempt 1
    assert service.release(db, again.receipt) == "ready"
    again = service.claim(db, "jobs", lease=60)  # 4, attempt 2: a release now buries it
    assert service.release(db, again.receipt) == "dead"

    for span in ("hour", "day"):
        data = activity.series(db, "jobs", span=span)
        got = {which: sum(data["queues"]["jobs"][which]) for which in activity.COUNTERS}
        assert got == {"pushed": 5, "popped": 3, "claimed": 3, "acked": 1, "failed": 2, "dead": 1}, span
        overall = activity.series(db, span=span)
        assert sorted(overall["queues"]) == ["jobs", "other"]
        assert sum(overall["total"]["pushed"]) == 6
        assert sum(overall["queues"]["other"]["pushed"]) == 1


def test_an_expired_lease_counts_as_a_failure_and_its_burial_as_a_dead_letter(fdbqueue_db, clock):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo", max_attempts=1)
    service.push(db, "jobs", "a")
    assert service.claim(db, "jobs", lease=1) is not None
    clock.advance(2)
    assert service.pop(db, "jobs") is None  # moves the spent lease to the dead letters
    data = activity.series(db, "jobs")
    totals = {which: sum(data["queues"]["jobs"][which]) for which in activity.COUNTERS}
    assert totals == {"pushed": 1, "popped": 0, "claimed": 1, "acked": 0, "failed": 1, "dead": 1}


def test_gauges_are_sampled_with_max_and_missing_where_nobody_looked(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    assert last(activity.series(db, "jobs"), "depth", "jobs") is None
    for i in range(4):
        service.push(db, "jobs", i)
    activity.sample(db, "jobs")
    service.pop_many(db, "jobs", 3)
    activity.sample(db)  # all queues: the bucket keeps the highest depth seen
    data = activity.series(db, "jobs")
    assert last(data, "depth", "jobs") == 4
    assert last(data, "age", "jobs") >= 0
    assert last(activity.series(db, "jobs", span="day"), "depth", "jobs") == 4


def test_the_series_shape(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    for span, (step, length) in activity.SPANS.items():
        data = activity.series(fdbqueue_db, span=span)
        assert data["span"] == span and data["step"] == step
        assert len(data["buckets"]) == length
        assert all(b - a == step for a, b in zip(data["buckets"], data["buckets"][1:]))
        assert set(data["total"]) == set(activity.COUNTERS + activity.GAUGES)
        assert all(len(v) == length for v in data["queues"]["jobs"].values())


def test_bad_input_is_refused(fdbqueue_db):
    with pytest.raises(InvalidArgument, match="span must be"):
        activity.series(fdbqueue_db, span="week")
    with pytest.raises(QueueNotFound):
        activity.series(fdbqueue_db, "missing")
    with pytest.raises(QueueNotFound):
        activity.sample(fdbqueue_db, "missing")


@transactional
def _bucket_keys(tr, name, granularity):
    _entry, qk = require(tr, name)
    sub = activity.space(qk)[granularity]
    r = sub.range()
    return sorted({sub.unpack(bytes(kv.key))[0] for kv in tr.get_range(r.start, r.stop)})


def test_retention_clears_old_buckets_without_reads_in_the_hot_path(fdbqueue_db, clock):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    service.push(db, "jobs", "old")
    old_minutes = _bucket_keys(db, "jobs", activity.MINUTES)
    old_hours = _bucket_keys(db, "jobs", activity.HOURS)
    assert len(old_minutes) == 1 and len(old_hours) == 1
    clock.advance(activity.MINUTES_KEPT * 60 + 120)
    service.push(db, "jobs", "new")  # the first write of a new minute clears what is past retention
    minutes = _bucket_keys(db, "jobs", activity.MINUTES)
    assert old_minutes[0] not in minutes and len(minutes) == 1
    assert old_hours[0] in _bucket_keys(db, "jobs", activity.HOURS)  # hours are kept longer
    clock.advance(activity.HOURS_KEPT * 3600 + 7200)
    service.pop(db, "jobs")
    hours = _bucket_keys(db, "jobs", activity.HOURS)
    assert old_hours[0] not in hours and len(hours) == 1
    data = activity.series(db, "jobs", span="day")
    assert sum(data["queues"]["jobs"]["popped"]) == 1 and sum(data["queues"]["jobs"]["pushed"]) == 0


def test_deleting_a_queue_removes_its_activity(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    service.push(db, "jobs", 1)
    _entry, qk = transactional(lambda tr: require(tr, "jobs"))(db)
    service.delete_queue(db, "jobs")
    r = activity.space(qk).range()
    assert list(db.create_transaction().get_range(r.start, r.stop)) == []
    service.create_queue(db, "jobs", kind="fifo")
    assert sum(activity.series(db, "jobs")["queues"]["jobs"]["pushed"]) == 0


# -- the admin's JSON ------------------------------------------------------------------------------


def data_url(**query) -> str:
    from django.utils.http import urlencode

    address = reverse("admin:fdbqueue_queue_activity_data")
    return f"{address}?{urlencode(query)}" if query else address


@pytest.mark.django_db
def test_the_json_endpoint_shape(op, fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    service.push(fdbqueue_db, "jobs", 1)
    response = op.get(data_url(queue="jobs", span="hour"))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "no-store" in response["Cache-Control"]
    data = response.json()
    assert set(data) == {"span", "step", "buckets", "counters", "gauges", "queues", "total"}
    assert list(data["queues"]) == ["jobs"]
    assert data["total"]["pushed"][-1] == 1
    assert data["total"]["depth"][-1] == 1  # the read sampled the gauges
    assert op.get(data_url(span="day")).json()["step"] == 3600
    assert op.get(reverse("admin:fdbqueue_queue_activity")).status_code == 200


@pytest.mark.django_db
def test_the_json_endpoint_refuses_bad_input_with_a_json_body(op, fdbqueue_db):
    response = op.get(data_url(span="week"))
    assert response.status_code == 400 and response.json()["code"] == "invalid_argument"
    response = op.get(data_url(queue="missing"))
    assert response.status_code == 404 and response.json()["code"] == "queue_not_found"


@pytest.mark.django_db
def test_the_json_endpoint_is_for_staff_with_the_view_permission(client, client_for, django_user_model, fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    assert client.get(data_url()).status_code == 302  # anonymous: to the login page
    member = client_for(make_user(django_user_model, "member", staff=False, perms=PERMS))
    response = member.get(data_url())
    assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login"))
    clerk = client_for(make_user(django_user_model, "clerk"))  # staff without the permission
    assert clerk.get(data_url()).status_code == 403
    assert clerk.get(reverse("admin:fdbqueue_queue_activity")).status_code == 403


# --- gauges sampled by the long-running processes, without a chart read -------------------------


@pytest.fixture
def frozen(monkeypatch):
    """Activity's clock stopped at now: the sample and the read fall in one minute bucket."""
    now_us = activity.now_micros()
    monkeypatch.setattr(activity, "now_micros", lambda: now_us)
    return now_us


def _depth_now(db, name):
    @transactional
    def read(tr):  # the raw bucket, so no chart read (which samples) is involved
        _entry, qk = require(tr, name)
        minute = activity.now_micros() // 60_000_000
        value = tr.get(activity.space(qk)[activity.MINUTES].pack((minute, activity.DEPTH)))
        return int.from_bytes(bytes(value), "little", signed=True) if value.present() else None

    return read(db)


def _burst_worker(db, name, handled):
    from django_fdbqueue.worker import Worker

    worker = Worker(db, name, lambda item: handled.append(item.value), burst=True, poll_wait=0.05)
    worker.start()
    assert worker.wait(timeout=60), "the burst did not end"
    return worker


def test_a_burst_worker_leaves_a_depth_point_without_a_chart_read(fdbqueue_db, frozen):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    service.create_queue(db, "idle", kind="fifo")
    for i in range(3):
        service.push(db, "jobs", i)
    assert _depth_now(db, "jobs") is None
    handled: list = []
    _burst_worker(db, "jobs", handled)
    assert sorted(handled) == [0, 1, 2]
    assert _depth_now(db, "jobs") == 3  # sampled as the worker started, before it took any
    assert _depth_now(db, "idle") == 0  # every queue, not only the worker's


def test_the_scheduler_once_leaves_a_depth_point_without_a_chart_read(fdbqueue_db, frozen):
    from django_fdbqueue import schedules

    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    service.push(db, "jobs", "a")
    schedules.run_once(db, sync=False)
    assert _depth_now(db, "jobs") == 1


def test_the_sampler_samples_once_per_minute_and_retries_a_failure_soon(fdbqueue_db, monkeypatch, caplog):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    calls = []
    real = activity.sample

    def flaky(database, name=None, *, now_us=None):
        calls.append(now_us)
        if len(calls) == 1:
            raise RuntimeError("store down")
        return real(database, name, now_us=now_us)

    monkeypatch.setattr(activity, "sample", flaky)
    sampler = activity.Sampler()
    minute = 60_000_000
    t0 = (activity.now_micros() // minute) * minute
    assert sampler.maybe_sample(db, t0) is False  # failed: logged, not raised
    assert "Could not sample" in caplog.text
    assert sampler.maybe_sample(db, t0 + 1_000_000) is False and len(calls) == 1  # not yet again
    assert sampler.maybe_sample(db, t0 + 6_000_000) is True and len(calls) == 2  # retried soon
    assert not sampler.due(t0 + 30_000_000)
    assert sampler.maybe_sample(db, t0 + 59_000_000) is False and len(calls) == 2  # once per minute
    assert sampler.maybe_sample(db, t0 + minute) is True and len(calls) == 3  # the next minute


def test_a_failing_sample_stops_neither_a_worker_nor_the_scheduler(fdbqueue_db, monkeypatch, caplog):
    import threading

    from django_fdbqueue import schedules
    from django_fdbqueue.fdbapi import make_error
    from django_fdbqueue.schedules import scheduler as scheduler_module

    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    for i in range(3):
        service.push(db, "jobs", i)
    failures = []

    def failing(*args, **kwargs):
        failures.append(1)
        raise make_error(1031)

    monkeypatch.setattr(activity, "sample", failing)
    handled: list = []
    _burst_worker(db, "jobs", handled)
    assert sorted(handled) == [0, 1, 2] and failures

    activity.forget_process_state()
    schedules.run_once(db, sync=False)  # no exception

    activity.forget_process_state()
    passes = []
    stop = threading.Event()
    real = scheduler_module.firing.fire_due

    def counting(database, now_us):
        passes.append(now_us)
        if len(passes) == 3:
            stop.set()
        return real(database, now_us)

    monkeypatch.setattr(scheduler_module.firing, "fire_due", counting)
    loop = schedules.Scheduler(db, max_wait=0.01, stop=stop, sync=False)
    runner = threading.Thread(target=loop.run, daemon=True)
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive() and len(passes) == 3
    assert len(failures) >= 3 and "Could not sample" in caplog.text
