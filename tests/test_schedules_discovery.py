"""Schedules declared in an app's ``schedules`` module: found by the scheduler and the system check
(never at start-up), and refused with one code, and the same words, in Python, over REST and on
the command line."""

from __future__ import annotations

import sys

import pytest

from django_fdbqueue import schedules, service
from django_fdbqueue.checks import check_declared_schedules
from django_fdbqueue.exceptions import InvalidSchedule
from django_fdbqueue.schedules import registry, scheduler
from tests.api_helpers import api, assert_error, user  # noqa: F401 - fixtures
from tests.cli_helpers import run

pytestmark = pytest.mark.django_db
APP = "tests.schedules_app"
MODULE = f"{APP}.{registry.MODULE}"
PUSH = {"kind": "push", "queue": "jobs", "value": {"from": "app"}}


@pytest.fixture
def db(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    return fdbqueue_db


@pytest.fixture
def app_declares(settings, monkeypatch):
    """Install the test app, with an empty registry not yet discovered; call it with what its
    ``schedules`` module declares (name -> declare's keyword arguments)."""
    from tests import schedules_app

    monkeypatch.setattr(registry, "_registry", {})
    monkeypatch.setattr(registry, "_discovered", False)
    sys.modules.pop(MODULE, None)
    settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, APP]

    def declare(**declarations):
        monkeypatch.setattr(schedules_app, "DECLARED", declarations)

    yield declare
    sys.modules.pop(MODULE, None)  # the next test's discovery imports it again, with its own DECLARED


@pytest.fixture
def clock_us(monkeypatch):
    """The wall clock the scheduler command reads, set by the test."""

    def set_to(micros):
        monkeypatch.setattr(scheduler, "now_micros", lambda: micros)

    return set_to


# --- discovery ---------------------------------------------------------------------------------------


def test_the_scheduler_finds_the_schedules_an_app_declares_in_its_schedules_module(db, app_declares, clock_us):
    app_declares(**{"app-tick": {"queue": "jobs", "value": {"from": "app"}, "interval": 3600}})
    assert MODULE not in sys.modules  # the app is ready, and its schedules module still unread
    assert run("scheduler", "--once", "--json").json() == []  # synced, not due yet
    assert MODULE in sys.modules
    (listed,) = run("schedules", "--json").json()
    assert listed["name"] == "app-tick" and listed["declared"] is True
    clock_us(schedules.get(db, "app-tick").next_run_us)
    fired = run("scheduler", "--once", "--json").json()
    assert [f["name"] for f in fired] == ["app-tick"] and service.pop(db, "jobs").value == {"from": "app"}


def test_discovery_imports_the_module_once(db, app_declares):
    app_declares(**{"app-tick": {"queue": "jobs", "interval": 60}})
    assert [s.name for s in schedules.declared()] == ["app-tick"]
    module = sys.modules[MODULE]
    schedules.declared()
    assert sys.modules[MODULE] is module


# --- the system check --------------------------------------------------------------------------------


def test_the_check_warns_of_a_declared_schedule_no_scheduler_has_stored(db, app_declares):
    app_declares(**{"app-tick": {"queue": "jobs", "interval": 60}})
    (warning,) = check_declared_schedules()
    assert warning.id == "fdbqueue.W005" and "'app-tick'" in warning.msg and warning.hint
    schedules.sync(db)
    assert check_declared_schedules() == []


def test_the_check_says_nothing_without_declarations_or_a_readable_store(db, app_declares, monkeypatch):
    assert check_declared_schedules() == []
    app_declares(**{"app-tick": {"queue": "jobs", "interval": 60}})

    def unreachable():
        raise OSError("no store here")

    monkeypatch.setattr("django_fdbqueue.connection.get_database", unreachable)
    assert check_declared_schedules() == []


def test_the_check_reports_a_schedules_module_that_cannot_be_imported(db, app_declares):
    app_declares(**{"app-tick": {"queue": "jobs", "interval": 60, "catch_up": "some"}})
    (error,) = check_declared_schedules()
    assert error.id == "fdbqueue.E013" and "InvalidSchedule" in error.msg and "catch_up" in error.msg


# --- one code per refusal, on every face ------------------------------------------------------------------

#: Refusals of a schedule's definition: a name and create's keyword arguments.
REFUSALS = {
    "cron-and-interval": {"name": "tick", "cron": "* * * * *", "interval": 60},
    "neither-cron-nor-interval": {"name": "tick"},
    "bad-catch-up": {"name": "tick", "interval": 60, "catch_up": "some"},
    "bad-name": {"name": "bad name", "interval": 60},
}


def _python_refusal(db, definition):
    options = dict(definition)
    with pytest.raises(InvalidSchedule) as raised:
        schedules.create(db, options.pop("name"), PUSH, **options)
    return raised.value


@pytest.mark.parametrize("refusal", REFUSALS)
def test_python_and_rest_refuse_with_one_code_and_the_same_words(db, api, refusal):
    error = _python_refusal(db, REFUSALS[refusal])
    assert error.code == InvalidSchedule.code
    body = assert_error(
        api.post("/api/schedules/", {**REFUSALS[refusal], "target": PUSH}, format="json"), 400, error.code
    )
    assert error.message in body["detail"], body
    assert schedules.list_schedules(db) == []


@pytest.mark.parametrize("refusal", REFUSALS)
def test_the_command_line_refuses_a_declaration_with_the_same_words(db, app_declares, refusal):
    error = _python_refusal(db, REFUSALS[refusal])
    options = dict(REFUSALS[refusal])
    app_declares(**{options.pop("name"): {"queue": "jobs", **options}})
    result = run("scheduler", "--once")
    assert result.code == 2 and error.message in result.err, result
    assert schedules.list_schedules(db) == []


@pytest.mark.parametrize("change", [{"catch_up": "some"}, {"catch_up": None}, {"cron": None, "interval": None}])
def test_rest_update_refusals_have_the_python_code(db, api, change):
    schedules.create(db, "tick", PUSH, interval=60)
    assert_error(api.patch("/api/schedules/tick/", change, format="json"), 400, InvalidSchedule.code)
    assert_error(api.get("/api/schedules/bad name/"), 400, InvalidSchedule.code)
