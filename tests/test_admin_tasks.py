"""The admin's task pages through Django's test client, and the demo's example tasks.

Results are made READY, RUNNING, SUCCESSFUL and FAILED by the real code paths: ``enqueue``, the
runner's start step, and :class:`TaskRunner` called on each queued item (synchronously, so the
tests need no waiting), plus one test with in-process :class:`TaskWorkers`, polled with a
deadline. Each test checks what a page did to the store, not only what it printed.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib import admin as django_admin
from django.core import mail
from django.test import Client
from django.urls import reverse

from django_fdbqueue import admin as fdbqueue_admin
from django_fdbqueue import service
from django_fdbqueue.fdbapi import make_error, transactional
from django_fdbqueue.models import Queue
from django_fdbqueue.tasks import backend as task_backend_module
from django_fdbqueue.tasks import results
from django_fdbqueue.tasks import runner as task_runner
from django_fdbqueue.admin.tasks import COUNT_LIMIT, RESULTS_PER_PAGE, call_text, decode_cursor, encode_cursor
from django_fdbqueue.tasks.queues import task_queue_of
from django_fdbqueue.tasks.runner import TaskRunner, TaskWorkers, backend_named

from . import task_functions as tf
from .admin_helpers import PERMS, make_user, text, url

pytestmark = pytest.mark.django_db

DEADLINE = 60
DEMO_PROJECT = Path(__file__).resolve().parent.parent / "demo_project"


# --- users, addresses, pages -------------------------------------------------------------------------


@pytest.fixture
def login(client, django_user_model):
    """``login(perms=..., staff=...)``: the test client, logged in as a new user with those permissions."""
    count = iter(range(1000))

    def log_in(perms=PERMS, staff: bool = True, csrf: bool = False) -> Client:
        user = make_user(django_user_model, f"user{next(count)}", staff=staff, perms=perms)
        session = Client(enforce_csrf_checks=True) if csrf else client
        session.force_login(user)
        return session

    return log_in


@pytest.fixture
def op(login) -> Client:
    """A staff user holding every queue permission."""
    return login()


def row_of(page: str, marker: str) -> str:
    """The table row whose attributes contain ``marker`` (e.g. ``data-queue="default"``)."""
    match = re.search(r"<tr[^>]*" + re.escape(marker) + r"[^>]*>(.*?)</tr>", page, re.S)
    assert match, f"no row with {marker} in the page"
    return match.group(1)


def cell(row: str, field: str) -> str:
    """The text of the row's cell of class ``field-<field>``, without tags."""
    match = re.search(r'class="[^"]*\bfield-' + re.escape(field) + r'\b[^"]*"[^>]*>(.*?)</t[dh]>', row, re.S)
    assert match, f"no field-{field} cell in the row"
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1))).strip()


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]] if response.context else []


# --- tasks in every state --------------------------------------------------------------------------------


@pytest.fixture
def backend(fdbqueue_db):
    return backend_named("default")


def run_queued(db, backend, queue_name: str = "default", worker_id: str = "test-worker-1") -> int:
    """Run every task waiting in the task queue, one after another, as a worker would; how many ran."""
    runner = TaskRunner(backend, worker_id)
    ran = 0
    while (item := service.pop(db, backend.queue_for(queue_name), end="max")) is not None:
        runner(item)
        ran += 1
    return ran


def mark_running(db, backend, result_id: str, worker_id: str = "test-worker-2") -> None:
    """What a worker does when it takes a task, without running it: the task's item is taken, the result RUNNING."""
    service.pop(db, backend.queue_for("default"), end="max")
    assert task_runner._start(db, result_id, worker_id) is not None


@pytest.fixture
def states(fdbqueue_db, backend):
    """One task of ``default`` in each status, and a SUCCESSFUL one in ``emails``; their results by status."""
    ok = tf.add.enqueue(2, 3)
    failed = tf.fail.enqueue("boom")
    assert run_queued(fdbqueue_db, backend) == 2
    email = tf.shout.enqueue("hello")
    run_queued(fdbqueue_db, backend, "emails")
    running = tf.add.enqueue(5, 5)
    mark_running(fdbqueue_db, backend, running.id)
    ready = tf.add.enqueue(7, b=8)
    return {"READY": ready, "RUNNING": running, "SUCCESSFUL": ok, "FAILED": failed, "email": email}


def record(db, result_id: str) -> results.Record:
    found = results.get(db, result_id)
    assert found is not None
    return found


# --- who gets in -----------------------------------------------------------------------------------


def pages(states) -> list[tuple[str, str, tuple]]:
    failed = states["FAILED"].id
    return [
        ("GET", "tasks", ()),
        ("GET", "task_list", ("default", "default")),
        ("GET", "task_detail", (failed,)),
        ("POST", "task_retry", (failed,)),
    ]


def call(client: Client, method: str, view: str, args: tuple):
    address = url(view, *args)
    return client.get(address) if method == "GET" else client.post(address)


def test_anonymous_and_non_staff_users_are_sent_to_the_login(client, login, fdbqueue_db, states):
    for session in (client, login(staff=False)):
        for method, view, args in pages(states):
            response = call(session, method, view, args)
            assert response.status_code == 302, (view, response.status_code)
            assert response["Location"].startswith(reverse("admin:login"))
    assert record(fdbqueue_db, states["FAILED"].id).status == "FAILED"


def test_staff_without_the_queue_permissions_are_refused(login, fdbqueue_db, states):
    session = login(perms=())
    for method, view, args in pages(states):
        assert call(session, method, view, args).status_code == 403, view
    assert record(fdbqueue_db, states["FAILED"].id).status == "FAILED"


@pytest.mark.parametrize("perms", [["view_queue"], ["view_queue", "consume_queue"]])
def test_view_permission_shows_the_pages(login, states, perms):
    session = login(perms=perms)
    for method, view, args in pages(states)[:3]:
        assert call(session, method, view, args).status_code == 200, view


def test_grants_decide_per_task_queue(client, django_user_model, fdbqueue_db, states):
    # Granted on tasks.emails only: the default queue's tasks "do not exist"; consume retries there only.
    from django_fdbqueue.models import QueueGrant

    user = make_user(django_user_model, "mailer")
    QueueGrant.objects.create(user=user, pattern="tasks.emails", actions="view,consume")
    session = client
    session.force_login(user)
    overview = text(session.get(url("tasks")))
    assert 'data-queue="emails"' in overview and 'data-queue="default"' not in overview
    assert session.get(url("task_list", "default", "emails")).status_code == 200
    assert session.get(url("task_detail", states["email"].id)).status_code == 200
    failed = states["FAILED"].id
    for method, view, args in pages(states)[1:]:  # the default queue's list, a result, its retry
        assert call(session, method, view, args).status_code == 404, view
    assert record(fdbqueue_db, failed).status == "FAILED"


def test_view_permission_alone_cannot_retry(login, fdbqueue_db, states):
    session = login(perms=["view_queue"])
    failed = states["FAILED"].id
    page = text(session.get(url("task_detail", failed)))
    assert 'id="retry-form"' not in page and url("task_retry", failed) not in page
    assert session.post(url("task_retry", failed)).status_code == 403
    assert record(fdbqueue_db, failed).status == "FAILED"
    assert service.get_queue(fdbqueue_db, "tasks.default").size == 1  # only the READY task's item


# --- the list of task queues ---------------------------------------------------------------------


def test_the_queue_list_links_to_the_tasks(op, fdbqueue_db):
    page = text(op.get(url("changelist")))
    assert f'href="{url("tasks")}"' in page and 'id="tasks-link"' in page


def test_the_tasks_page_counts_each_queues_results_by_status(op, states):
    page = text(op.get(url("tasks")))
    default = row_of(page, 'data-queue="default"')
    assert [cell(default, s) for s in ("ready", "running", "successful", "failed")] == ["1", "1", "1", "1"]
    assert f'href="{url("task_list", "default", "default")}?status=FAILED"' in default
    assert f'href="{url("change", "tasks.default")}"' in default  # the queue behind it
    emails = row_of(page, 'data-queue="emails"')
    assert [cell(emails, s) for s in ("ready", "running", "successful", "failed")] == ["0", "0", "1", "0"]
    assert cell(emails, "backend") == "default"


def test_a_task_queue_not_used_yet_is_listed_without_its_queue(op, fdbqueue_db):
    page = text(op.get(url("tasks")))
    row = row_of(page, 'data-queue="emails"')
    assert "created on first use" in cell(row, "queue")
    assert not service.queue_exists(fdbqueue_db, "tasks.emails")  # looking created nothing


def test_other_kinds_of_backend_are_named_not_listed(op, fdbqueue_db, settings):
    settings.TASKS = {
        **settings.TASKS,
        "inline": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"},
        "broken": {"BACKEND": "no.such.Backend"},
    }
    response = op.get(url("tasks"))
    page = text(response)
    assert 'TASKS["inline"] uses ImmediateBackend' in page
    assert 'TASKS["broken"] cannot be loaded' in page
    assert 'data-backend="inline"' not in page and 'data-backend="default"' in page
    assert op.get(url("task_list", "inline", "default")).status_code == 404


def test_without_an_fdbqueue_backend_the_page_says_so(op, fdbqueue_db, settings):
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
    page = text(op.get(url("tasks")))
    assert "No backend in the TASKS setting is a" in page


def test_with_no_queues_listed_the_task_queues_are_found_in_the_store(op, fdbqueue_db, settings):
    settings.TASKS = {"default": {"BACKEND": "django_fdbqueue.tasks.FDBQueueBackend", "QUEUES": []}}
    tf.add.using(queue_name="reports").enqueue(1, 1)
    service.create_queue(fdbqueue_db, "elsewhere", "fifo")  # not under the prefix: no task queue
    page = text(op.get(url("tasks")))
    assert cell(row_of(page, 'data-queue="reports"'), "ready") == "1"
    assert 'data-queue="elsewhere"' not in page
    assert op.get(url("task_list", "default", "reports")).status_code == 200


# --- one queue's results ---------------------------------------------------------------------------


def test_each_status_tab_lists_its_tasks(op, states):
    base = url("task_list", "default", "default")
    page = text(op.get(base))  # READY by default
    assert "Ready (1)" in page and "Running (1)" in page and "Successful (1)" in page and "Failed (1)" in page
    ready = row_of(page, f'data-result-id="{states["READY"].id}"')
    assert cell(ready, "task").startswith("tests.task_functions.add")
    assert cell(ready, "args") == "7, b=8"
    assert (cell(ready, "status"), cell(ready, "attempts"), cell(ready, "started")) == ("READY", "0", "—")

    page = text(op.get(base, {"status": "RUNNING"}))
    running = row_of(page, f'data-result-id="{states["RUNNING"].id}"')
    assert (cell(running, "attempts"), cell(running, "finished")) == ("1", "—")
    assert cell(running, "started") != "—"

    page = text(op.get(base, {"status": "FAILED"}))
    failed = row_of(page, f'data-result-id="{states["FAILED"].id}"')
    assert cell(failed, "error") == "builtins.ValueError" and cell(failed, "args") == '"boom"'
    assert cell(failed, "finished") != "—"
    assert states["READY"].id not in page and states["SUCCESSFUL"].id not in page
    assert f'href="{url("task_detail", states["FAILED"].id)}"' in failed

    page = text(op.get(url("task_list", "default", "emails"), {"status": "SUCCESSFUL"}))
    assert states["email"].id in page and states["SUCCESSFUL"].id not in page


def test_results_are_paged_oldest_first(op, fdbqueue_db, backend):
    enqueued = [tf.add.enqueue(n, 0).id for n in range(RESULTS_PER_PAGE + 5)]
    base = url("task_list", "default", "default")
    first = op.get(base)
    page = text(first)
    shown = re.findall(r'data-result-id="([^"]+)"', page)
    assert shown == enqueued[:RESULTS_PER_PAGE]
    assert "‹ First page" not in page
    next_url = re.search(r'href="([^"]+)"[^>]*rel="next"', page).group(1).replace("&amp;", "&")
    page = text(op.get(next_url))
    assert re.findall(r'data-result-id="([^"]+)"', page) == enqueued[RESULTS_PER_PAGE:]
    assert "‹ First page" in page and 'rel="next"' not in page


def test_a_bad_page_link_or_status_falls_back(op, states):
    base = url("task_list", "default", "default")
    for query in ({"after": "garbage"}, {"after": "12.x" + "y" * 300}, {"after": "-5.abc"}):
        response = op.get(base, query)
        assert response.status_code == 200
        assert states["READY"].id in text(response)
    assert any("page link is not valid" in m for m in messages_of(op.get(base, {"after": "garbage"})))
    response = op.get(base, {"status": "NOPE"})
    assert response.status_code == 200 and states["READY"].id in text(response)


def test_unknown_backends_and_queues_are_404(op, fdbqueue_db):
    assert op.get(url("task_list", "nope", "default")).status_code == 404
    assert op.get(url("task_list", "default", "elsewhere")).status_code == 404  # not in QUEUES


def test_long_arguments_are_shortened_and_everything_is_escaped(op, fdbqueue_db, backend):
    result = tf.shout.enqueue("<script>alert(1)</script>" + "x" * 200)
    page = text(op.get(url("task_list", "default", "emails")))
    shown = cell(row_of(page, f'data-result-id="{result.id}"'), "args")
    assert shown.endswith("…") and len(shown) < 120
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    detail = text(op.get(url("task_detail", result.id)))
    assert "<script>alert" not in detail and "&lt;script&gt;alert(1)&lt;/script&gt;" in detail


def test_the_cursor_and_call_text_helpers():
    assert decode_cursor(encode_cursor((123, "abc.def"))) == (123, "abc.def")
    for bad in ("", "123", ".abc", "x.abc", "1.", "9" * 21 + ".a"):
        assert decode_cursor(bad) is None
    assert call_text([1, "a"], {"to": None}) == '1, "a", to=null'
    assert call_text(["é" * 100], {}, limit=10) == '"' + "é" * 8 + "…"


def test_a_queue_name_leads_back_to_its_task_queue(fdbqueue_db):
    assert task_queue_of("tasks.emails") == ("default", "emails")
    for other in ("tasks.elsewhere", "demo.jobs", "tasks", "tasks."):
        assert task_queue_of(other) is None


def test_counts_beyond_the_limit_read_as_a_lower_bound(op, fdbqueue_db, backend, monkeypatch):
    monkeypatch.setattr(
        results, "counts", lambda tr, backend, name, limit=COUNT_LIMIT: dict.fromkeys(results.STATUSES, limit)
    )
    page = text(op.get(url("tasks")))
    assert cell(row_of(page, 'data-queue="default"'), "ready") == f"{COUNT_LIMIT}+"


# --- one result --------------------------------------------------------------------------------------


def test_a_failed_task_shows_its_traceback_and_a_retry_button(op, states):
    failed = states["FAILED"].id
    page = text(op.get(url("task_detail", failed)))
    assert 'id="retry-form"' in page and f'action="{url("task_retry", failed)}"' in page
    assert "csrfmiddlewaretoken" in page
    assert "builtins.ValueError" in page and "ValueError: boom" in page
    assert "Traceback (most recent call last)" in page and "task_functions.py" in page
    assert "test-worker-1" in page
    assert re.search(r'id="task-args">\[\s*"boom"\s*\]</pre>', html.unescape(page))
    assert 'id="task-return-value"' not in page
    assert re.search(r'id="stat-status">FAILED<', page) and re.search(r'id="stat-attempts">1<', page)


def test_a_successful_task_shows_its_return_value_and_no_retry(op, states):
    page = text(op.get(url("task_detail", states["SUCCESSFUL"].id)))
    assert re.search(r'id="task-return-value">\s*<h2>Return value</h2>\s*<pre[^>]*>5</pre>', page)
    assert 'id="retry-form"' not in page and "No errors." in page
    assert re.search(r'id="task-kwargs">\{\}</pre>', page)
    page = text(op.get(url("task_detail", states["READY"].id)))
    assert re.search(r'id="task-kwargs">\{\s*"b": 8\s*\}</pre>', html.unescape(page))
    assert "none yet" in page and 'id="retry-form"' not in page


def test_missing_or_malformed_result_ids_are_404(op, fdbqueue_db):
    for bad in ("no-such-result", "x" * 500, " ", "a%2Fb"):
        assert op.get(url("task_detail", bad)).status_code == 404, bad
        assert op.post(url("task_retry", bad)).status_code == 404, bad


@transactional
def _store_record(tr, rec: results.Record) -> None:
    results.write(tr, rec, None)


def test_a_result_whose_task_is_gone_is_still_shown(op, fdbqueue_db):
    gone = results.Record(
        id="gone-task",
        task_path="removed.module.old_task",
        backend="default",
        queue_name="default",
        priority=0,
        args=[1],
        kwargs={},
        status="FAILED",
        enqueued_us=1,
        finished_us=2,
        errors=[{"exception_class_path": "builtins.ImportError", "traceback": "ImportError: gone"}],
    )
    _store_record(fdbqueue_db, gone)
    page = text(op.get(url("task_detail", "gone-task")))
    assert "removed.module.old_task" in page and "ImportError: gone" in page
    page = text(op.get(url("task_list", "default", "default"), {"status": "FAILED"}))
    assert cell(row_of(page, 'data-result-id="gone-task"'), "error") == "builtins.ImportError"


def test_a_result_of_a_backend_no_longer_configured_cannot_be_retried(op, fdbqueue_db):
    orphan = results.Record(
        id="orphan",
        task_path="tests.task_functions.fail",
        backend="retired",
        queue_name="default",
        priority=0,
        args=["x"],
        kwargs={},
        status="FAILED",
        enqueued_us=1,
        errors=[{"exception_class_path": "builtins.ValueError", "traceback": "x"}],
    )
    _store_record(fdbqueue_db, orphan)
    page = text(op.get(url("task_detail", "orphan")))
    assert 'TASKS["retired"] is not an FDBQueueBackend' in page and 'id="retry-form"' not in page
    response = op.post(url("task_retry", "orphan"), follow=True)
    assert any("nothing was changed" in m for m in messages_of(response))
    assert record(fdbqueue_db, "orphan").status == "FAILED"


# --- retry -------------------------------------------------------------------------------------------


def test_retry_needs_the_csrf_token(login, fdbqueue_db, states):
    session = login(csrf=True)
    failed = states["FAILED"].id
    assert session.post(url("task_retry", failed)).status_code == 403
    assert record(fdbqueue_db, failed).status == "FAILED"
    page = text(session.get(url("task_detail", failed)))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = session.post(url("task_retry", failed), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == url("task_detail", failed)
    assert record(fdbqueue_db, failed).status == "READY"


def test_retry_queues_a_failed_task_again_keeping_its_history(op, fdbqueue_db, backend, states):
    failed = states["FAILED"].id
    before = record(fdbqueue_db, failed)
    size = service.get_queue(fdbqueue_db, "tasks.default").size
    response = op.post(url("task_retry", failed), follow=True)
    assert response.redirect_chain == [(url("task_detail", failed), 302)]
    assert any("queued again" in m for m in messages_of(response))
    after = record(fdbqueue_db, failed)
    assert after.status == "READY" and after.finished_us is None and after.expires_us is None
    assert after.errors == before.errors and after.worker_ids == before.worker_ids
    assert service.get_queue(fdbqueue_db, "tasks.default").size == size + 1
    assert states["FAILED"].id in text(op.get(url("task_list", "default", "default")))
    assert 'id="retry-form"' not in text(response)  # READY now: nothing to retry

    # Run again (it fails again): the second error joins the first.
    run_queued(fdbqueue_db, backend, worker_id="test-worker-3")
    again = record(fdbqueue_db, failed)
    assert again.status == "FAILED" and len(again.errors) == 2
    assert again.worker_ids == ["test-worker-1", "test-worker-3"]
    page = text(op.get(url("task_detail", failed)))
    assert page.count("ValueError: boom") == 2 and re.search(r'id="stat-attempts">2<', page)


def test_each_attempt_is_labelled_with_its_worker(op, fdbqueue_db, backend, states):
    """Issue 28: a task retried on the same worker listed that worker twice, with nothing to
    tell the attempts apart."""
    failed = states["FAILED"].id
    assert op.post(url("task_retry", failed)).status_code == 302
    run_queued(fdbqueue_db, backend, worker_id="test-worker-1")  # the same worker, again
    assert record(fdbqueue_db, failed).worker_ids == ["test-worker-1", "test-worker-1"]
    page = text(op.get(url("task_detail", failed)))
    workers = re.search(r'id="stat-workers">(.*?)</td>', page, re.S).group(1)
    items = [html.unescape(re.sub(r"<[^>]+>", "", li)).strip() for li in re.findall(r"<li[^>]*>(.*?)</li>", workers)]
    assert items == ["attempt 1: test-worker-1", "attempt 2: test-worker-1"]


def test_only_a_failed_task_can_be_retried(op, fdbqueue_db, states):
    for status in ("READY", "RUNNING", "SUCCESSFUL"):
        result_id = states[status].id
        before = record(fdbqueue_db, result_id)
        response = op.post(url("task_retry", result_id), follow=True)
        assert response.status_code == 200
        assert any("Only a failed task can be retried" in m for m in messages_of(response)), status
        assert record(fdbqueue_db, result_id) == before
    size = service.get_queue(fdbqueue_db, "tasks.default").size
    failed = states["FAILED"].id
    op.post(url("task_retry", failed))
    response = op.post(url("task_retry", failed), follow=True)  # a second press: already READY
    assert any("Only a failed task" in m for m in messages_of(response))
    assert service.get_queue(fdbqueue_db, "tasks.default").size == size + 1  # queued once


def test_a_get_on_retry_changes_nothing(op, fdbqueue_db, states):
    failed = states["FAILED"].id
    response = op.get(url("task_retry", failed))
    assert response.status_code == 302 and response["Location"] == url("task_detail", failed)
    assert record(fdbqueue_db, failed).status == "FAILED"


def wait_for(condition, what: str, seconds: float = DEADLINE) -> None:
    """Poll ``condition`` until it holds, failing the test after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_retried_task_is_run_again_by_a_worker(op, fdbqueue_db, backend):
    result = tf.fail.enqueue("again")
    workers = TaskWorkers(backend, ["default"])
    workers.start()
    try:
        wait_for(lambda: record(fdbqueue_db, result.id).status == "FAILED", "the first failure")
        assert op.post(url("task_retry", result.id)).status_code == 302
        wait_for(lambda: len(record(fdbqueue_db, result.id).errors) == 2, "the second failure")
    finally:
        workers.stop()
        assert workers.wait(DEADLINE)
    final = record(fdbqueue_db, result.id)
    assert final.status == "FAILED" and final.worker_ids == [workers.worker_id] * 2
    assert (
        cell(
            row_of(
                text(op.get(url("task_list", "default", "default"), {"status": "FAILED"})),
                f'data-result-id="{result.id}"',
            ),
            "attempts",
        )
        == "2"
    )


# --- store failures ---------------------------------------------------------------------------------


def test_a_store_failure_is_the_store_error_page(op, fdbqueue_db, states, monkeypatch):
    def timed_out(*args, **kwargs):
        raise make_error(1031)

    monkeypatch.setattr(results, "counts", timed_out)
    for address in (url("tasks"), url("task_list", "default", "default")):
        response = op.get(address)
        assert response.status_code == 503 and "The queue store did not answer" in text(response)
    monkeypatch.setattr(results, "get", timed_out)
    assert op.get(url("task_detail", states["FAILED"].id)).status_code == 503


def test_a_store_failure_during_retry_says_it_may_have_happened(op, fdbqueue_db, states, monkeypatch):
    def timed_out(*args, **kwargs):
        raise make_error(1031)

    monkeypatch.setattr(task_backend_module, "_retry", timed_out)
    response = op.post(url("task_retry", states["FAILED"].id))
    assert response.status_code == 503 and "may or may not have taken effect" in text(response)
    assert record(fdbqueue_db, states["FAILED"].id).status == "FAILED"


# --- without the Tasks framework ---------------------------------------------------------------------


def test_the_task_pages_exist_only_with_the_tasks_framework(monkeypatch):
    def names() -> set[str]:
        return {pattern.name for pattern in fdbqueue_admin.QueueAdmin(Queue, django_admin.site).get_urls()}

    assert fdbqueue_admin.tasks_framework_available()
    assert {"fdbqueue_queue_tasks", "fdbqueue_queue_task_detail", "fdbqueue_queue_task_retry"} <= names()
    monkeypatch.setattr(fdbqueue_admin, "tasks_framework_available", lambda: False)
    without = names()
    assert not any("task" in name for name in without)
    assert {"fdbqueue_queue_changelist", "fdbqueue_queue_change"} <= without


WITHOUT_TASKS = """
import importlib.abc, sys

class NoTasksFramework(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "django_tasks" or name.startswith("django.tasks"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoTasksFramework())

import django
from django.conf import settings

settings.configure(
    SECRET_KEY="x", ROOT_URLCONF="admin_only_urls", ALLOWED_HOSTS=["testserver"],
    INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                    "django.contrib.sessions", "django.contrib.messages", "django_fdbqueue"],
    MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware",
                "django.contrib.auth.middleware.AuthenticationMiddleware",
                "django.contrib.messages.middleware.MessageMiddleware"],
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                   "django.contrib.auth.context_processors.auth",
                                                   "django.contrib.messages.context_processors.messages"]}}],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    FDBQUEUE={"ENGINE": "embedded", "PATH": sys.argv[1]},
)
django.setup()
from django.core.management import call_command
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import NoReverseMatch, reverse

call_command("migrate", verbosity=0)
client = Client()
client.force_login(get_user_model().objects.create_superuser("admin", password="pw"))
page = client.get(reverse("admin:fdbqueue_queue_changelist"))
assert page.status_code == 200, page.status_code
assert b"tasks-link" not in page.content
try:
    reverse("admin:fdbqueue_queue_tasks")
except NoReverseMatch:
    pass
else:
    raise AssertionError("the task pages exist without the framework")
assert not any(name.startswith("django_fdbqueue.tasks") for name in sys.modules)
print("ok")
"""


def test_without_the_tasks_framework_the_queue_pages_work_and_have_no_task_pages(tmp_path):
    (tmp_path / "admin_only_urls.py").write_text(
        "from django.contrib import admin\nfrom django.urls import path\nurlpatterns = [path('admin/', admin.site.urls)]\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parent.parent)])}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TASKS, str(tmp_path / "store.sqlite3")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_a_queue_named_tasks_keeps_its_pages(op, fdbqueue_db):
    service.create_queue(fdbqueue_db, "tasks", "fifo")
    assert op.get(url("change", "tasks")).status_code == 200
    assert url("change", "tasks") == url("tasks") + "change/"


# --- the demo's example tasks -----------------------------------------------------------------------


@pytest.fixture
def demo(monkeypatch):
    """The demo project importable (``demo.tasks``, ``demo.urls``), as when its manage.py runs."""
    monkeypatch.syspath_prepend(str(DEMO_PROJECT))
    import demo.tasks

    return demo.tasks


def test_the_demos_tasks_import_and_validate(demo):
    from demo import settings as demo_settings

    from django_fdbqueue.tasks import FDBQueueBackend
    from django_fdbqueue.tasks.compat import Task

    demo_backend = FDBQueueBackend("default", demo_settings.TASKS["default"])
    assert list(demo_backend.check()) == []
    for example in demo.EXAMPLES.values():
        assert isinstance(example, Task)
        demo_backend.validate_task(example)
        assert example.module_path.startswith("demo.tasks.")
    assert demo.send_welcome_email.queue_name == "emails"


def test_the_demos_tasks_run_fail_and_recover(op, fdbqueue_db, backend, demo):
    primes = demo.count_primes.enqueue(100)
    flaky = demo.flaky_report.enqueue(fail_attempts=1)
    welcome = demo.send_welcome_email.enqueue("ada@example.com", name="Ada")
    run_queued(fdbqueue_db, backend)
    run_queued(fdbqueue_db, backend, "emails")
    assert record(fdbqueue_db, primes.id).return_value == {"below": 100, "count": 25, "largest": 97}
    assert record(fdbqueue_db, welcome.id).return_value == 1
    assert [message.to for message in mail.outbox] == [["ada@example.com"]] and "Ada" in mail.outbox[0].body
    failed = record(fdbqueue_db, flaky.id)
    assert failed.status == "FAILED" and failed.errors[0]["exception_class_path"] == "builtins.ConnectionError"
    assert op.post(url("task_retry", flaky.id)).status_code == 302
    run_queued(fdbqueue_db, backend, worker_id="test-worker-2")
    recovered = record(fdbqueue_db, flaky.id)
    assert recovered.status == "SUCCESSFUL" and recovered.return_value == "Report built on attempt 2."


def test_count_primes_refuses_out_of_range_input(demo):
    with pytest.raises(ValueError, match="whole number"):
        demo.count_primes.call(demo.MAX_PRIMES_BELOW + 1)
    assert demo.count_primes.call(2) == {"below": 2, "count": 0, "largest": None}
    assert demo.count_primes.call(3) == {"below": 3, "count": 1, "largest": 2}


@pytest.fixture
def demo_site(demo, settings):
    """The demo's URLs and its template directory, in the test settings."""
    settings.ROOT_URLCONF = "demo.urls"
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [DEMO_PROJECT / "demo" / "templates"]}]
    return reverse("demo-enqueue-example")


def test_the_demo_adds_an_enqueue_form_to_the_tasks_page(op, login, fdbqueue_db, demo_site):
    page = text(op.get(url("tasks")))
    assert 'id="demo-enqueue"' in page and f'action="{demo_site}"' in page
    assert 'data-queue="default"' in page  # the app's page, extended
    assert 'id="demo-enqueue"' not in text(login(perms=["view_queue"]).get(url("tasks")))


def test_the_demo_form_enqueues_an_example(op, login, fdbqueue_db, backend, demo_site):
    response = op.post(demo_site, {"example": "primes", "below": "1000"}, follow=True)
    assert response.redirect_chain == [(url("tasks"), 302)]
    assert any("Enqueued count_primes" in m for m in messages_of(response))
    (queued,), _last = results.page(fdbqueue_db, "default", "default", "READY", None, 10)
    assert (queued.task_path, queued.args) == ("demo.tasks.count_primes", [1000])

    response = op.post(demo_site, {"example": "email", "address": "not an address"}, follow=True)
    assert any("Nothing was enqueued" in m for m in messages_of(response))
    assert op.post(demo_site, {"example": "email", "address": "grace@example.com"}).status_code == 302
    assert results.counts(fdbqueue_db, "default", "emails")["READY"] == 1
    assert login(perms=["view_queue"]).post(demo_site, {"example": "flaky", "fail_attempts": "1"}).status_code == 403
    assert op.get(demo_site).status_code == 405
    assert results.counts(fdbqueue_db, "default", "default")["READY"] == 1


def test_the_demo_project_passes_its_checks():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demo.settings"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--fail-level", "WARNING"],
        cwd=DEMO_PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_a_task_queue_s_page_links_to_its_tasks(fdbqueue_db, op):
    tf.add.enqueue(1, 2)  # creates tasks.default
    service.create_queue(fdbqueue_db, "plain")
    page = text(op.get(url("change", "tasks.default")))
    assert f'href="{url("task_list", "default", "default")}" id="tasks-of-queue"' in page
    assert 'id="tasks-of-queue"' not in text(op.get(url("change", "plain")))
