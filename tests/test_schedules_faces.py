"""Periodic schedules through their faces: the REST routes, the admin page and the command line."""

from __future__ import annotations

import json
import signal
import time

import pytest
from django.urls import reverse

from django_fdbqueue import schedules, service
from tests.admin_helpers import PERMS, make_user, text
from tests.api_helpers import anonymous, api, assert_error, user  # noqa: F401 - fixtures
from tests.cli_helpers import run
from tests.processes import command_process

pytestmark = pytest.mark.django_db
URL = "/api/schedules/"
PUSH = {"kind": "push", "queue": "jobs", "value": {"job": "report"}}


@pytest.fixture(autouse=True)
def _no_declarations(monkeypatch):
    """Declarations made elsewhere in this process (a docs page, another test) are not synced here."""
    from django_fdbqueue.schedules import registry

    monkeypatch.setattr(registry, "_registry", {})


@pytest.fixture
def db(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    return fdbqueue_db


# --- REST -----------------------------------------------------------------------------------------------


def test_rest_create_list_retrieve_update_pause_resume_run_now_delete(db, api):
    body = {"name": "nightly", "target": PUSH, "cron": "30 2 * * *", "tz": "Europe/Paris", "catch_up": "all"}
    created = api.post(URL, body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["next_run"].endswith("Z") and created.json()["catch_up"] == "all"
    assert_error(api.post(URL, body, format="json"), 409, "schedule_already_exists")
    assert [s["name"] for s in api.get(URL).json()] == ["nightly"]
    assert api.get(f"{URL}nightly/").json()["cron"] == "30 2 * * *"
    changed = api.patch(f"{URL}nightly/", {"interval": 60}, format="json")
    assert changed.status_code == 200 and changed.json()["interval"] == 60 and changed.json()["cron"] is None
    assert api.post(f"{URL}nightly/pause/").json()["next_run"] is None
    assert api.post(f"{URL}nightly/resume/").json()["paused"] is False
    ran = api.post(f"{URL}nightly/run-now/")
    assert ran.status_code == 200 and ran.json()["result"]["status"] == "ok"
    assert ran.json()["result"]["item"] == service.peek(db, "jobs").id
    assert api.delete(f"{URL}nightly/").status_code == 204
    assert_error(api.get(f"{URL}nightly/"), 404, "schedule_not_found")
    assert_error(api.post(f"{URL}nightly/run-now/"), 404, "schedule_not_found")


@pytest.mark.parametrize(
    "change, field",
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "not cron"}, "cron"),
        ({"tz": "Nowhere/Land"}, "tz"),
        ({"catch_up": "most"}, "catch_up"),
        ({"interval": 0, "cron": None}, "interval"),
        ({"interval": -1, "cron": None}, "interval"),
        ({"target": {"kind": "mail"}}, "target"),
        ({"target": {"kind": "push", "queue": "bad name"}}, "target"),
        ({"name": "bad name"}, "name"),
        ({"interval": 60}, "cron"),  # both a cron expression and an interval
        ({"prio": 1}, "prio"),
    ],
)
def test_rest_bad_input_is_a_400_and_stores_nothing(db, api, change, field):
    body = {"name": "tick", "target": PUSH, "cron": "* * * * *", **change}
    response = api.post(URL, body, format="json")
    assert_error(response, 400)
    assert field in response.json()["errors"], response.json()
    assert schedules.list_schedules(db) == []


def test_rest_bad_update_is_a_400_and_changes_nothing(db, api):
    before = schedules.create(db, "tick", PUSH, interval=30)
    for change in ({"cron": "* * *"}, {"tz": "Mars/Base"}, {"interval": 0}, {"catch_up": 3}, {"name": "x"}):
        assert_error(api.patch(f"{URL}tick/", change, format="json"), 400)
    assert_error(api.patch(f"{URL}missing/", {"tz": "UTC"}, format="json"), 404)
    assert schedules.get(db, "tick") == before


def test_rest_needs_authentication(db, anonymous):
    assert anonymous.get(URL).status_code in (401, 403)
    assert anonymous.post(URL, {"name": "x", "target": PUSH, "interval": 5}, format="json").status_code in (401, 403)
    assert schedules.list_schedules(db) == []


# --- admin ------------------------------------------------------------------------------------------------


def admin_url(view, *args):
    return reverse(f"admin:fdbqueue_queue_{view}", args=args)


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(make_user(django_user_model, "operator", perms=PERMS))
    return client


def test_admin_lists_schedules_with_next_and_last_run_and_last_result(db, staff):
    schedules.create(db, "tick", PUSH, interval=30, tz="Europe/Paris")
    schedules.run_now(db, "tick")
    page = staff.get(admin_url("schedules"))
    assert page.status_code == 200
    body = text(page)
    assert 'data-name="tick"' in body and "Europe/Paris" in body and "every 30 s" in body
    assert service.peek(db, "jobs").id in body  # the last result names the pushed item
    assert 'id="schedules-link"' in text(staff.get(admin_url("changelist")))


def test_admin_actions_pause_resume_run_now_delete(db, staff):
    schedules.create(db, "tick", PUSH, interval=30)
    action = admin_url("schedule_action", "tick")
    assert staff.post(action, {"action": "pause"}).status_code == 302
    assert schedules.get(db, "tick").paused and "<strong>paused</strong>" in text(staff.get(admin_url("schedules")))
    staff.post(action, {"action": "resume"})
    assert not schedules.get(db, "tick").paused
    staff.post(action, {"action": "run-now"})
    assert service.size(db, "jobs") == 1 and schedules.get(db, "tick").last_result["status"] == "ok"
    assert staff.get(action).status_code == 405
    staff.post(action, {"action": "delete"})
    assert schedules.list_schedules(db) == []
    assert staff.post(action, {"action": "pause"}).status_code == 404


def test_admin_add_and_edit_with_checks(db, staff):
    form = {
        "name": "tick",
        "kind": "push",
        "queue": "jobs",
        "value": '{"a": 1}',
        "priority": "0",
        "cron": "*/5 * * * *",
        "tz": "UTC",
        "catch_up": "last",
        "backend": "default",
        "kwargs": "{}",
    }
    for bad, field_text in (
        ({"cron": "bad"}, "not a valid cron"),
        ({"tz": "Nowhere/Land"}, "Unknown time zone"),
        ({"value": "{nope"}, "Not JSON"),
        ({"cron": "", "interval": "0"}, "interval"),
    ):
        response = staff.post(admin_url("schedules"), {**form, **bad})
        assert response.status_code == 400 and field_text in text(response), bad
    assert schedules.list_schedules(db) == []
    assert staff.post(admin_url("schedules"), form).status_code == 302
    assert schedules.get(db, "tick").target["value"] == {"a": 1}
    edit = admin_url("schedule_edit", "tick")
    assert "*/5 * * * *" in text(staff.get(edit))
    assert staff.post(edit, {**form, "cron": "", "interval": "90", "catch_up": "all"}).status_code == 302
    after = schedules.get(db, "tick")
    assert (after.cron, after.interval, after.catch_up) == (None, 90.0, "all")
    assert staff.post(edit, {**form, "tz": "Nowhere/Land"}).status_code == 400
    assert schedules.get(db, "tick") == after


def test_admin_is_for_staff_with_permissions(db, client, django_user_model):
    schedules.create(db, "tick", PUSH, interval=30)
    client.force_login(make_user(django_user_model, "visitor", staff=False))
    assert client.get(admin_url("schedules")).status_code == 302  # to the login page
    client.force_login(make_user(django_user_model, "viewer", perms=("view_queue",)))
    assert client.get(admin_url("schedules")).status_code == 200
    assert client.post(admin_url("schedule_action", "tick"), {"action": "pause"}).status_code == 403
    assert not schedules.get(db, "tick").paused


# --- command line ----------------------------------------------------------------------------------------


def test_cli_once_fires_what_is_due(db, clock_us):
    tick = schedules.create(db, "tick", PUSH, interval=3600)
    assert run("scheduler", "--once", "--json").json() == []
    clock_us.set(tick.next_run_us)
    result = run("scheduler", "--once", "--json")
    assert result.code == 0 and [f["name"] for f in result.json()] == ["tick"]
    assert service.size(db, "jobs") == 1
    (listed,) = run("schedules", "--json").json()
    assert listed["name"] == "tick" and listed["last_result"]["status"] == "ok"
    assert "tick" in run("schedules").out


@pytest.fixture
def clock_us(monkeypatch):
    """The wall clock the scheduler command reads, set by the test."""
    from django_fdbqueue.schedules import scheduler

    class Setter:
        def set(self, micros):
            monkeypatch.setattr(scheduler, "now_micros", lambda: micros)

    return Setter()


def test_cli_scheduler_stops_on_sigterm(db, tmp_path):
    schedules.create(db, "tick", PUSH, interval=1)
    with command_process(tmp_path, "scheduler") as start:
        process, out, err = start("--max-wait", "0.2", "--json")
        deadline = time.monotonic() + 60
        while service.size(db, "jobs") < 1:  # it fires the first occurrence within about a second
            assert time.monotonic() < deadline and process.poll() is None, err.read_text()
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, err.read_text()
    fired = json.loads(out.read_text())
    assert fired and {f["name"] for f in fired} == {"tick"}
