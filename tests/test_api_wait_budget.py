"""The per-process budget of REST long polls (issue 30, item 4): under WSGI a waiting pop or claim
holds a server thread, so beyond ``FDBQUEUE["WAIT_BUDGET"]`` waits a request is answered at once.

Waiters run in threads through DRF's test client; the test knows they are parked by polling the
budget's count with a deadline, never by sleeping. Every thread is joined with a deadline.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from django_fdbqueue.api import waitbudget
from django_fdbqueue.api.waitbudget import WaitBudget

from .api_helpers import assert_empty_204, make_queue, poll, push, queue_url
from .api_helpers import api, user  # noqa: F401 - fixtures, found by name (api needs user)

pytestmark = pytest.mark.django_db

# Long enough for a loaded 2-core machine, short enough that a broken test fails quickly.
DEADLINE_SECONDS = 10.0
# A waiter's wait: far longer than any test needs, so only a push (or the budget) ends it.
LONG_WAIT = 15


# ----------------------------------------------------------------------------- helpers


@pytest.fixture
def wait_budget(settings, fdbqueue_db) -> Callable[[int | None], None]:
    """Set WAIT_BUDGET on the test's store (changing FDBQUEUE reopens the app's handle on it)."""

    def set_budget(limit: int | None) -> None:
        settings.FDBQUEUE = {**settings.FDBQUEUE, "WAIT_BUDGET": limit}

    yield set_budget
    assert waitbudget.budget.active == 0, "a wait kept its place in the budget"


def claim(client: APIClient, name: str, wait: float, lease: float = 60):
    return client.post(queue_url(name, "claim"), {"wait": wait, "lease": lease}, format="json")


def pop(client: APIClient, name: str, wait: float):
    return client.post(queue_url(name, "pop") + f"?wait={wait:g}")


def assert_refused(response) -> None:
    """A wait the budget refused: an empty 204 that says when to come back."""
    assert_empty_204(response)
    assert response["Retry-After"] == str(waitbudget.RETRY_AFTER_SECONDS), dict(response.items())
    assert int(response["Retry-After"]) >= 1


class Waiters:
    """Threads that each send one long poll with a client of their own; their answers, in order."""

    def __init__(self, user: Any, send: Callable[[APIClient], Any], count: int) -> None:
        self.responses: list[Any] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(user, send), daemon=True) for _ in range(count)]
        for thread in self.threads:
            thread.start()

    def _run(self, user: Any, send: Callable[[APIClient], Any]) -> None:
        try:
            client = APIClient()
            client.force_authenticate(user=user)
            response = send(client)
            with self._lock:
                self.responses.append(response)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            self.errors.append(error)

    def join(self) -> list[Any]:
        deadline = time.monotonic() + DEADLINE_SECONDS
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(thread.is_alive() for thread in self.threads), "a waiter never answered"
        assert not self.errors, self.errors
        return self.responses


def parked(count: int) -> None:
    """Wait (with a deadline) until ``count`` requests hold a place in the budget."""
    poll(lambda: waitbudget.budget.active == count, f"{count} waiting requests in the budget", DEADLINE_SECONDS)


def counts(api: APIClient, name: str) -> tuple[int, int]:
    """(size, leased) of the queue: size counts the ready items only."""
    info = api.get(queue_url(name)).json()
    return info["size"], info["leased"]


# ----------------------------------------------------------------------------- the budget over HTTP


@pytest.mark.parametrize("limit", [1, 2])
def test_waits_beyond_the_budget_answer_at_once_and_a_push_wakes_those_within(api, user, wait_budget, limit):
    wait_budget(limit)
    make_queue(api, "q")
    waiters = Waiters(user, lambda client: claim(client, "q", LONG_WAIT), limit)
    parked(limit)
    started = time.monotonic()
    assert_refused(claim(api, "q", LONG_WAIT))
    assert_refused(pop(api, "q", LONG_WAIT))  # pops and claims share one budget
    assert time.monotonic() - started < LONG_WAIT / 2  # neither waited
    assert waitbudget.budget.active == limit
    pushed = [push(api, "q", {"value": index}) for index in range(limit)]
    assert [response.status_code for response in pushed] == [201] * limit
    responses = waiters.join()
    assert [response.status_code for response in responses] == [200] * limit
    got = sorted(response.json()["item"]["value"] for response in responses)
    assert got == list(range(limit))  # each item to exactly one waiter
    assert all("Retry-After" not in response for response in responses)
    assert counts(api, "q") == (0, limit)  # none ready, each under its waiter's lease
    assert waitbudget.budget.active == 0


def test_a_freed_place_lets_the_next_request_wait(api, user, fdbqueue_db, wait_budget):
    wait_budget(1)
    make_queue(api, "q")
    waiters = Waiters(user, lambda client: pop(client, "q", LONG_WAIT), 1)
    parked(1)
    assert_refused(pop(api, "q", LONG_WAIT))
    assert push(api, "q", {"value": "first"}).status_code == 201
    assert [response.json()["value"] for response in waiters.join()] == ["first"]
    parked(0)
    second = Waiters(user, lambda client: pop(client, "q", LONG_WAIT), 1)
    parked(1)  # the place the first waiter gave back
    assert push(api, "q", {"value": "second"}).status_code == 201
    assert [response.json()["value"] for response in second.join()] == ["second"]


def test_a_refused_wait_still_takes_a_visible_item(api, wait_budget):
    wait_budget(0)
    make_queue(api, "q")
    for value in ("a", "b"):
        assert push(api, "q", {"value": value}).status_code == 201
    claimed = claim(api, "q", LONG_WAIT)
    assert claimed.status_code == 200 and claimed.json()["item"]["value"] == "a"
    popped = pop(api, "q", LONG_WAIT)
    assert popped.status_code == 200 and popped.json()["value"] == "b"
    assert "Retry-After" not in claimed and "Retry-After" not in popped


def test_budget_0_answers_every_long_poll_at_once(api, wait_budget):
    wait_budget(0)
    make_queue(api, "q")
    started = time.monotonic()
    assert_refused(claim(api, "q", 20))
    assert_refused(pop(api, "q", 20))
    assert time.monotonic() - started < 10
    # wait=0 never asked to wait: a plain 204, nothing to come back for.
    plain = pop(api, "q", 0)
    assert_empty_204(plain)
    assert "Retry-After" not in plain
    assert counts(api, "q") == (0, 0)


def test_no_budget_lets_every_request_wait(api, user, wait_budget):
    wait_budget(None)
    make_queue(api, "q")
    waiters = Waiters(user, lambda client: claim(client, "q", LONG_WAIT), 3)
    parked(3)
    for index in range(3):
        assert push(api, "q", {"value": index}).status_code == 201
    got = sorted(response.json()["item"]["value"] for response in waiters.join())
    assert got == [0, 1, 2]


def test_a_failed_wait_gives_its_place_back(api, wait_budget):
    wait_budget(1)
    response = claim(api, "missing", LONG_WAIT)
    assert response.status_code == 404 and response.json()["code"] == "queue_not_found"
    assert waitbudget.budget.active == 0
    make_queue(api, "q")
    assert push(api, "q", {"value": "x"}).status_code == 201
    assert claim(api, "q", LONG_WAIT).status_code == 200


def test_a_view_without_a_budget_waits_whatever_the_setting(api, wait_budget, monkeypatch):
    """What a server whose waits hold no thread does (ASGI, later): the view does not ask."""
    from django_fdbqueue.api.views import QueueViewSet

    wait_budget(0)
    monkeypatch.setattr(QueueViewSet, "wait_budget", None)
    make_queue(api, "q")
    started = time.monotonic()
    response = pop(api, "q", 0.3)
    assert time.monotonic() - started >= 0.25  # it did wait out its 0.3 s
    assert_empty_204(response)
    assert "Retry-After" not in response


def test_the_waiting_routes_document_the_204_with_retry_after():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path in ("/api/queues/{name}/pop/", "/api/queues/{name}/claim/"):
        no_content = schema["paths"][path]["post"]["responses"]["204"]
        assert no_content["headers"]["Retry-After"]["schema"] == {"type": "integer"}
        assert "WAIT_BUDGET" in no_content["description"]
    peek = schema["paths"]["/api/queues/{name}/peek/"]["get"]["responses"]["204"]
    assert "headers" not in peek  # a route that never waits is never refused


# ----------------------------------------------------------------------------- the budget itself


def test_a_budget_is_a_counting_semaphore_that_never_blocks():
    limit = [2]
    budget = WaitBudget(lambda: limit[0])
    assert budget.try_enter() and budget.try_enter()
    assert not budget.try_enter()
    assert budget.active == 2
    limit[0] = 3  # the limit is read at each entry
    assert budget.try_enter() and budget.active == 3
    for _ in range(3):
        budget.leave()
    assert budget.active == 0
    with pytest.raises(RuntimeError, match="without a place"):
        budget.leave()


def test_threads_never_take_more_places_than_the_limit():
    budget = WaitBudget(lambda: 5)
    start = threading.Barrier(16, timeout=DEADLINE_SECONDS)
    taken: list[bool] = []

    def enter() -> None:
        start.wait()
        taken.append(budget.try_enter())

    threads = [threading.Thread(target=enter, daemon=True) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    assert not any(thread.is_alive() for thread in threads)
    assert taken.count(True) == 5 and budget.active == 5


# ----------------------------------------------------------------------------- the setting


def test_the_default_budget_is_below_the_production_guides_4_threads(settings):
    from django_fdbqueue.conf import DEFAULT_WAIT_BUDGET, get_settings

    settings.FDBQUEUE = {k: v for k, v in settings.FDBQUEUE.items() if k != "WAIT_BUDGET"}
    assert get_settings().wait_budget == DEFAULT_WAIT_BUDGET == 2


@pytest.mark.parametrize("value", [0, 2, 64, None])
def test_good_wait_budgets_pass_the_checks(settings, tmp_path, value):
    settings.FDBQUEUE = {"PATH": tmp_path / "store.sqlite3", "WAIT_BUDGET": value}
    assert run_checks(tags=["fdbqueue"]) == []


@pytest.mark.parametrize("value", [-1, 1.5, "2", True, [2]])
def test_a_bad_wait_budget_is_e014_and_refused(settings, tmp_path, value):
    from django_fdbqueue.conf import get_settings

    settings.FDBQUEUE = {"PATH": tmp_path / "store.sqlite3", "WAIT_BUDGET": value}
    messages = run_checks(tags=["fdbqueue"])
    assert [message.id for message in messages] == ["fdbqueue.E014"], [str(m) for m in messages]
    assert "WAIT_BUDGET" in messages[0].msg and repr(value) in messages[0].msg
    assert "threads" in messages[0].hint
    with pytest.raises(ImproperlyConfigured, match=r"WAIT_BUDGET.*fdbqueue\.E014"):
        get_settings()
