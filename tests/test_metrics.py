"""Prometheus metrics: the guarded endpoint, per queue gauges, per process instruments, the hook.

Counters are per process and shared by every test, so the tests compare scrapes taken before and
after what they do. Subprocesses cover what one process cannot: an interpreter where
prometheus-client cannot be imported, and multiprocess mode summing other processes' counts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient, APIRequestFactory, force_authenticate

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidQueueName, QueueNotFound
from django_fdbqueue.fdbapi import FDBError, make_error
from django_fdbqueue.metrics import MISSING_DEPENDENCY
from django_fdbqueue.metrics.collectors import QueueCollector, read_queues
from django_fdbqueue.service import observe

from .api_helpers import anonymous, api, user  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

URL = "/metrics/"
ROOT = Path(__file__).resolve().parent.parent

Samples = dict[tuple[str, frozenset], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, by name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(client: APIClient) -> Samples:
    response = client.get(URL)
    assert response.status_code == 200, response.content
    return parse(response.content.decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value, 0 when the series does not exist (yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def delta(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


# ----------------------------------------------------------------------------- the guard


def test_anonymous_is_refused(anonymous):  # noqa: F811
    response = anonymous.get(URL)
    assert response.status_code in (401, 403), response.content
    assert response.json()["code"] == "not_authenticated"
    assert b"fdbqueue_" not in response.content


def test_wrong_basic_credentials_are_refused(anonymous, user):  # noqa: F811
    anonymous.credentials(HTTP_AUTHORIZATION="Basic YWxpY2U6bm9wZQ==")  # alice:nope
    response = anonymous.get(URL)
    # 401 or 403 as for the API: DRF picks by whether the first authentication class has a header.
    assert response.status_code in (401, 403), response.content
    assert response.json()["code"] == "authentication_failed"


def test_the_projects_authentication_lets_a_user_in(anonymous, user):  # noqa: F811
    """Real DRF authentication (basic auth, as configured in the test settings), not a forced user."""
    anonymous.credentials(HTTP_AUTHORIZATION="Basic YWxpY2U6d29uZGVybGFuZA==")  # alice:wonderland
    response = anonymous.get(URL)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert response["Cache-Control"] == "no-store"
    samples = parse(response.content.decode())
    assert value(samples, "fdbqueue_store_up") == 1


def test_permission_classes_of_the_api_apply(settings, api, django_user_model):  # noqa: F811
    settings.FDBQUEUE = {**settings.FDBQUEUE, "PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"]}
    response = api.get(URL)
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    staff = APIClient()
    staff.force_authenticate(django_user_model.objects.create_user("root", is_staff=True, is_superuser=True))
    assert staff.get(URL).status_code == 200


def test_openmetrics_when_asked_for(api):  # noqa: F811
    response = api.get(URL, HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.endswith(b"# EOF\n")


def test_not_in_the_api_schema(api):  # noqa: F811
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    assert not any("metrics" in path for path in schema.json()["paths"])


# ----------------------------------------------------------------------------- per queue gauges


def test_queue_gauges_follow_the_store(api, fdbqueue_db):  # noqa: F811
    db = fdbqueue_db
    started = time.time()
    service.create_queue(db, "mail")
    for n in range(5):
        service.enqueue(db, "mail", n)
    service.dequeue(db, "mail")
    service.dequeue(db, "mail")
    service.claim(db, "mail", lease=60)
    service.enqueue(db, "mail", "later", delay=60)
    service.create_queue(db, "jobs", kind="priority", max_attempts=1)
    service.push(db, "jobs", "doomed", priority=3)
    assert service.release(db, service.claim(db, "jobs").receipt) == "dead"

    samples = scrape(api)
    waited = time.time() - started

    for state, expected in (("ready", 2), ("leased", 1), ("delayed", 1), ("dead", 0)):
        assert value(samples, "fdbqueue_queue_items", queue="mail", state=state) == expected, state
    for state, expected in (("ready", 0), ("leased", 0), ("delayed", 0), ("dead", 1)):
        assert value(samples, "fdbqueue_queue_items", queue="jobs", state=state) == expected, state
    assert value(samples, "fdbqueue_queue_pushed_total", queue="mail") == 6
    assert value(samples, "fdbqueue_queue_popped_total", queue="mail") == 2
    age = value(samples, "fdbqueue_queue_oldest_item_age_seconds", queue="mail")
    assert 0 < age <= waited + 1  # one second of slack between the clocks of datetime and time
    assert ("fdbqueue_queue_oldest_item_age_seconds", frozenset({("queue", "jobs")})) in samples
    assert value(samples, "fdbqueue_queue_oldest_item_age_seconds", queue="jobs") == 0
    assert value(samples, "fdbqueue_queues") == 2
    assert value(samples, "fdbqueue_queues_truncated") == 0
    assert value(samples, "fdbqueue_store_up") == 1


def test_a_scrape_reads_a_bounded_number_of_queues(fdbqueue_db):
    for name in ("a", "b", "c"):
        service.create_queue(fdbqueue_db, name)
    infos, truncated = read_queues(fdbqueue_db, max_queues=2, page_size=1)
    assert ([info.name for info in infos], truncated) == (["a", "b"], True)
    infos, truncated = read_queues(fdbqueue_db, max_queues=3, page_size=2)
    assert ([info.name for info in infos], truncated) == (["a", "b", "c"], False)

    from django_fdbqueue.metrics.views import MetricsView

    request = APIRequestFactory().get(URL)
    force_authenticate(request, user=SimpleNamespace(is_authenticated=True, is_active=True, is_superuser=True))
    response = MetricsView.as_view(max_queues=2)(request)
    samples = parse(response.content.decode())
    assert value(samples, "fdbqueue_queues") == 2
    assert value(samples, "fdbqueue_queues_truncated") == 1
    assert ("fdbqueue_queue_pushed_total", frozenset({("queue", "c")})) not in samples


def test_an_unreadable_store_leaves_the_queue_metrics_out(caplog):
    def broken() -> None:
        raise make_error(1031)

    families = {family.name: family for family in QueueCollector(database=broken).collect()}
    assert families["fdbqueue_store_up"].samples[0].value == 0
    assert families["fdbqueue_queue_items"].samples == []
    assert "could not read the queue store" in caplog.text


# ----------------------------------------------------------------------------- per process instruments


def test_operations_are_counted_and_timed(api, fdbqueue_db):  # noqa: F811
    db = fdbqueue_db
    service.create_queue(db, "work")
    before = scrape(api)

    for n in range(3):
        service.enqueue(db, "work", n)  # an alias of push: counted once, as push
    service.pop_min(db, "work")
    service.dequeue(db, "work")
    lease = service.claim(db, "work")
    service.ack(db, lease.receipt)
    assert service.pop(db, "work") is None
    assert service.claim(db, "work", wait=0.01) is None
    with pytest.raises(QueueNotFound):
        service.pop(db, "missing")

    after = scrape(api)
    counted = {
        ("push", "ok"): 3,
        ("pop", "ok"): 2,
        ("pop", "empty"): 1,
        ("pop", "refused"): 1,
        ("claim", "ok"): 1,
        ("claim_wait", "empty"): 1,
        ("ack", "ok"): 1,
        ("enqueue", "ok"): 0,
        ("dequeue", "ok"): 0,
        ("pop_min", "ok"): 0,
    }
    for (operation, outcome), expected in counted.items():
        got = delta(before, after, "fdbqueue_operations_total", operation=operation, outcome=outcome)
        assert got == expected, (operation, outcome)
    for operation, expected in (("push", 3), ("pop", 4), ("claim", 1), ("claim_wait", 1), ("ack", 1)):
        count = delta(before, after, "fdbqueue_operation_duration_seconds_count", operation=operation)
        assert count == expected, operation
        total = delta(before, after, "fdbqueue_operation_duration_seconds_sum", operation=operation)
        assert total > 0, operation
        inf = delta(before, after, "fdbqueue_operation_duration_seconds_bucket", operation=operation, le="+Inf")
        assert inf == expected, operation
    # The blocking claim waited its 10 ms; the histogram saw it.
    assert delta(before, after, "fdbqueue_operation_duration_seconds_sum", operation="claim_wait") >= 0.01


def test_fdb_retries_show_up(api, fdbqueue_db, faults):  # noqa: F811
    db = fdbqueue_db
    service.create_queue(db, "flaky")
    before = scrape(api)
    faults.fail_next("not_committed", "not_committed", "unknown_not_applied")
    service.push(db, "flaky", "x", dedup_key="once")
    after = scrape(api)

    assert delta(before, after, "fdbqueue_fdb_retries_total", code="1020", error="not_committed") == 2
    assert delta(before, after, "fdbqueue_fdb_retries_total", code="1021", error="commit_unknown_result") == 1
    assert delta(before, after, "fdbqueue_operations_total", operation="push", outcome="ok") == 1
    assert value(after, "fdbqueue_queue_items", queue="flaky", state="ready") == 1


# ----------------------------------------------------------------------------- the service's hook


@pytest.fixture
def recorded(monkeypatch):
    """Only a recording listener is registered; yields what it saw."""
    seen: list[tuple[str, str, float]] = []
    monkeypatch.setattr(observe, "_listeners", ())
    observe.add_listener(lambda *call: seen.append(call))
    return seen


def test_outcomes(recorded, fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority")
    service.push(db, "q", 1)
    service.peek_max(db, "q")
    service.pop(db, "q")
    service.pop(db, "q")
    with pytest.raises(InvalidQueueName):
        service.push(db, "not a name!", 1)

    @observe.observed
    def fails_in_the_store() -> None:
        raise make_error(1031)

    @observe.observed(name="custom")
    def has_a_bug() -> None:
        raise RuntimeError("bug")

    with pytest.raises(FDBError):
        fails_in_the_store()
    with pytest.raises(RuntimeError):
        has_a_bug()

    assert [(operation, outcome) for operation, outcome, _ in recorded] == [
        ("create_queue", "ok"),
        ("push", "ok"),
        ("peek", "ok"),
        ("pop", "ok"),
        ("pop", "empty"),
        ("push", "refused"),
        ("fails_in_the_store", "fdb_error"),
        ("custom", "error"),
    ]
    assert all(seconds >= 0 for _, _, seconds in recorded)


def test_a_failing_listener_does_not_fail_the_operation(recorded, fdbqueue_db, caplog):
    def broken(*call: object) -> None:
        raise ValueError("listener bug")

    observe.add_listener(broken)
    service.create_queue(fdbqueue_db, "q")
    assert service.size(fdbqueue_db, "q") == 0
    assert [operation for operation, _, _ in recorded] == ["create_queue", "size"]
    assert "listener bug" in caplog.text
    observe.remove_listener(broken)
    assert len(observe.listeners()) == 1


def test_no_listener_no_clock(monkeypatch, fdbqueue_db, api):  # noqa: F811
    """Without listeners a decorated call does not even read the clock, and nothing is counted."""
    before = scrape(api)
    monkeypatch.setattr(observe, "_listeners", ())

    def no_clock() -> float:
        raise AssertionError("the clock was read with no listener registered")

    monkeypatch.setattr(observe, "_clock", no_clock)
    service.create_queue(fdbqueue_db, "quiet")
    service.push(fdbqueue_db, "quiet", 1)
    assert service.pop(fdbqueue_db, "quiet").value == 1
    monkeypatch.undo()  # listeners back, so the scrape below is itself counted as usual
    after = scrape(api)
    assert delta(before, after, "fdbqueue_operations_total", operation="push", outcome="ok") == 0
    assert delta(before, after, "fdbqueue_operations_total", operation="pop", outcome="ok") == 0


def test_decorated_functions_keep_their_names_and_signatures():
    import inspect

    assert service.push.__name__ == "push"
    assert "dedup_key" in inspect.signature(service.push).parameters
    assert service.claim.__doc__.startswith("Take the next visible item")


# ----------------------------------------------------------------------------- without prometheus-client


def test_the_endpoint_says_what_to_install(monkeypatch, api):  # noqa: F811
    from django_fdbqueue.metrics import views

    monkeypatch.setattr(views, "exposition", None)
    response = api.get(URL)
    assert response.status_code == 501
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().strip() == MISSING_DEPENDENCY


_WITHOUT_PROMETHEUS = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class Missing(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "prometheus_client" or name.startswith("prometheus_client."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Missing())
    import django
    django.setup()
    from types import SimpleNamespace
    from django.core.exceptions import ImproperlyConfigured
    from django.urls import resolve
    from rest_framework.test import APIRequestFactory, force_authenticate
    from django_fdbqueue import metrics, service
    from django_fdbqueue.connection import get_database

    db = get_database()
    service.create_queue(db, "plain")
    service.push(db, "plain", 41)
    out = {"popped": service.pop(db, "plain").value, "available": metrics.available()}
    try:
        metrics.install()
    except ImproperlyConfigured as exc:
        out["install"] = str(exc)
    view = resolve("/metrics/").func
    out["anonymous"] = view(APIRequestFactory().get("/metrics/")).status_code
    request = APIRequestFactory().get("/metrics/")
    force_authenticate(request, user=SimpleNamespace(is_authenticated=True, is_active=True, is_superuser=True))
    response = view(request)
    out["status"], out["body"] = response.status_code, response.content.decode()
    out["imported"] = sorted(name for name in sys.modules if name.startswith("prometheus_client"))
    print(json.dumps(out))
    """
)


def test_the_app_works_without_prometheus_client():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PROMETHEUS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["popped"] == 41
    assert out["available"] is False
    assert out["install"] == MISSING_DEPENDENCY
    assert out["anonymous"] in (401, 403)
    assert out["status"] == 501
    assert "pip install" in out["body"] and "prometheus-client" in out["body"]
    assert out["imported"] == []


# ----------------------------------------------------------------------------- multiprocess mode


_PUSHER = textwrap.dedent(
    """
    import sys
    import django
    django.setup()
    from django_fdbqueue import metrics, service
    from django_fdbqueue.connection import get_database

    metrics.install()
    db = get_database()
    service.create_queue(db, "mp")
    for n in range(int(sys.argv[1])):
        service.push(db, "mp", n)
    """
)


def test_multiprocess_mode_sums_every_process(tmp_path, monkeypatch):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(ROOT),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
    }
    command = [sys.executable, "-c", _PUSHER]
    pushers = [
        subprocess.Popen([*command, str(n)], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) for n in (2, 3)
    ]
    for pusher in pushers:
        _out, err = pusher.communicate(timeout=120)
        assert pusher.returncode == 0, err

    from django_fdbqueue.metrics import exposition

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    registry = exposition.process_registry()
    assert registry is not exposition.REGISTRY
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in registry.collect()
        for sample in family.samples
    }
    assert value(samples, "fdbqueue_operations_total", operation="push", outcome="ok") == 5
    assert value(samples, "fdbqueue_operation_duration_seconds_count", operation="push") == 5

    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    assert exposition.process_registry() is exposition.REGISTRY


def test_the_worker_command_counts_only_in_multiprocess_mode(tmp_path, monkeypatch):
    """A worker serves no metrics: it reports its operations only where web processes can sum them."""
    from django_fdbqueue.cli import worker as worker_command
    from django_fdbqueue.metrics import instruments
    from django_fdbqueue.service import observe

    was_installed = instruments.record in observe.listeners()
    instruments.uninstall()
    try:
        monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
        worker_command._count_for_prometheus()
        assert instruments.record not in observe.listeners()
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
        worker_command._count_for_prometheus()
        assert instruments.record in observe.listeners()
    finally:
        instruments.uninstall()
        if was_installed:
            instruments.install()
