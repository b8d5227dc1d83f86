"""The REST API of reliable consumption (issue 10): leases, long polling, delays, dedup, dead letters.

Through DRF's test client on a fresh store per test, like test_api.py (the helpers both use
are in api_helpers.py). Waits are bounded: anything that depends on time passing polls
with a deadline, and threads meet through events, never through bare sleeps.
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

import pytest
from django_fdbqueue.service.extension import runtime
from rest_framework.test import APIClient

from .api_helpers import API, assert_empty_204, assert_error, make_queue, poll, push, queue_url
from .api_helpers import anonymous, api, user  # noqa: F401 - fixtures, found by name (api needs user)

pytestmark = pytest.mark.django_db

UTC = datetime.timezone.utc
# Long enough for a loaded 2-core machine, short enough that a broken test fails quickly.
DEADLINE_SECONDS = 10.0
SHORT = 0.2  # a lease or delay meant to run out during the test

ITEM_FIELDS = {"id", "priority", "value", "enqueued_at", "attempts"}
PUSHED_FIELDS = ITEM_FIELDS | {"duplicate"}
LEASE_QUEUE_FIELDS = {"leased", "delayed", "dead", "max_attempts"}


# ----------------------------------------------------------------------------- fixtures and helpers


def dead_letter_url(name: str, item_id: str, action: str | None = None) -> str:
    return queue_url(name, f"dead-letters/{item_id}") + (f"{action}/" if action else "")


def pushed(api: APIClient, name: str, value: Any, **extra: Any) -> dict:
    response = push(api, name, {"value": value, **extra})
    assert response.status_code == 201, response.content
    return response.json()


def post(api: APIClient, name: str, action: str, body: dict | None = None):
    return api.post(queue_url(name, action), body, format="json")


def claim(api: APIClient, name: str, **body: Any):
    return post(api, name, "claim", body)


def claimed(api: APIClient, name: str, **body: Any) -> dict:
    response = claim(api, name, **body)
    assert response.status_code == 200, response.content
    return response.json()


def queue(api: APIClient, name: str) -> dict:
    response = api.get(queue_url(name))
    assert response.status_code == 200, response.content
    return response.json()


def counts(api: APIClient, name: str) -> tuple[int, int, int, int]:
    """(size, leased, delayed, dead) of the queue."""
    info = queue(api, name)
    return info["size"], info["leased"], info["delayed"], info["dead"]


def values_of_every_page(api: APIClient, url: str, most_pages: int = 3) -> tuple[list, int]:
    """Follow a listing's next links from ``url``: every row's value, in order, and how many pages
    it took (failing beyond ``most_pages``, so a listing that never ends cannot hang the test)."""
    seen, pages = [], 0
    while url:
        page = api.get(url).json()
        seen += [r["value"] for r in page["results"]]
        url, pages = page["next"], pages + 1
        assert pages <= most_pages
    return seen, pages


def when(text: str) -> datetime.datetime:
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert moment.utcoffset() == datetime.timedelta(0)
    return moment


def now() -> datetime.datetime:
    return datetime.datetime.now(UTC)


def assert_about(moment: str, seconds_from_now: float, slack: float = DEADLINE_SECONDS) -> None:
    expected = now() + datetime.timedelta(seconds=seconds_from_now)
    assert abs((when(moment) - expected).total_seconds()) < slack, (moment, expected)


def wait_until(moment: datetime.datetime) -> None:
    """Let the wall clock pass ``moment`` (a lease's end), boundedly."""
    poll(lambda: now() > moment + datetime.timedelta(milliseconds=50), "the clock to pass the lease's end")


def claim_when_visible(api: APIClient, name: str, **body: Any) -> dict:
    """Claim once an item has come back (a lease or a delay running out), within the deadline."""

    def attempt() -> dict | None:
        response = claim(api, name, **body)
        assert response.status_code in (200, 204), response.content
        return response.json() if response.status_code == 200 else None

    return poll(attempt, "an item to become claimable")


# ----------------------------------------------------------------------------- queues: max_attempts and counts


def test_queue_body_has_lease_counts_and_max_attempts(api):
    created = make_queue(api, "q", max_attempts=3)
    assert LEASE_QUEUE_FIELDS <= set(created)
    assert (created["leased"], created["delayed"], created["dead"], created["max_attempts"]) == (0, 0, 0, 3)
    assert make_queue(api, "unlimited")["max_attempts"] is None
    listed = {q["name"]: q for q in api.get(API).json()["results"]}
    assert listed["q"]["max_attempts"] == 3 and LEASE_QUEUE_FIELDS <= set(listed["q"])


def test_create_queue_max_attempts_bounds(api):
    assert make_queue(api, "one", max_attempts=1)["max_attempts"] == 1
    assert make_queue(api, "many", max_attempts=1000)["max_attempts"] == 1000
    assert make_queue(api, "none", max_attempts=None)["max_attempts"] is None


@pytest.mark.parametrize("value", [0, -1, 1001, "3", 2.5, True, [3]])
def test_create_queue_with_a_bad_max_attempts_is_400_and_creates_nothing(api, value):
    response = api.post(API, {"name": "q", "max_attempts": value}, format="json")
    body = assert_error(response, 400, "invalid")
    assert "max_attempts" in body["errors"]
    assert api.get(API).json()["results"] == []


def test_patch_max_attempts(api):
    make_queue(api, "q")
    response = api.patch(queue_url("q"), {"max_attempts": 5}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["max_attempts"] == 5
    assert queue(api, "q")["max_attempts"] == 5
    assert api.patch(queue_url("q"), {"max_attempts": None}, format="json").json()["max_attempts"] is None
    assert queue(api, "q")["max_attempts"] is None


def test_patch_with_an_empty_body_changes_nothing(api):
    make_queue(api, "q", max_attempts=4)
    response = api.patch(queue_url("q"), {}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["max_attempts"] == 4


@pytest.mark.parametrize(
    "body",
    [
        {"max_attempts": 0},
        {"max_attempts": 1001},
        {"max_attempts": "2"},
        {"max_attempts": 1.5},
        {"max_attempts": True},
        {"kind": "priority"},
        {"name": "renamed"},
        {"max_attempts": 2, "typo": 1},
    ],
)
def test_patch_invalid_is_400_and_changes_nothing(api, body):
    make_queue(api, "q", max_attempts=7)
    assert_error(api.patch(queue_url("q"), body, format="json"), 400, "invalid")
    info = queue(api, "q")
    assert (info["max_attempts"], info["kind"], info["name"]) == (7, "fifo", "q")


def test_patch_missing_queue_is_404_and_bad_name_is_400(api):
    assert_error(api.patch(queue_url("nope"), {"max_attempts": 2}, format="json"), 404, "queue_not_found")
    assert_error(api.patch(queue_url("bad%20name"), {"max_attempts": 2}, format="json"), 400, "invalid_queue_name")


def test_put_is_not_allowed(api):
    make_queue(api, "q")
    assert_error(api.put(queue_url("q"), {"max_attempts": 2}, format="json"), 405)


# ----------------------------------------------------------------------------- claim


def test_claim_returns_the_item_a_receipt_and_the_lease_end(api):
    make_queue(api, "q")
    first = pushed(api, "q", {"job": 1})
    assert set(first) == PUSHED_FIELDS and (first["attempts"], first["duplicate"]) == (0, False)
    body = claimed(api, "q", lease=60)
    assert set(body) == {"item", "receipt", "lease_expires_at"}
    assert set(body["item"]) == ITEM_FIELDS
    assert body["item"]["id"] == first["id"] and body["item"]["value"] == {"job": 1}
    assert body["item"]["attempts"] == 1
    assert isinstance(body["receipt"], str) and body["receipt"]
    assert_about(body["lease_expires_at"], 60)
    assert counts(api, "q") == (0, 1, 0, 0)


def test_claim_defaults_to_a_30_second_lease_at_the_min_end(api):
    make_queue(api, "q")
    pushed(api, "q", "a")
    response = api.post(queue_url("q", "claim"))  # no body at all
    assert response.status_code == 200, response.content
    assert_about(response.json()["lease_expires_at"], 30)


def test_a_claimed_item_is_invisible_to_a_second_claim_pop_and_peek(api):
    make_queue(api, "q")
    for value in ("a", "b"):
        pushed(api, "q", value)
    assert claimed(api, "q")["item"]["value"] == "a"
    assert claimed(api, "q")["item"]["value"] == "b"
    assert_empty_204(claim(api, "q"))
    assert_empty_204(api.post(queue_url("q", "pop")))
    assert_empty_204(api.get(queue_url("q", "peek")))
    assert counts(api, "q") == (0, 2, 0, 0)


def test_claim_from_the_max_end(api):
    make_queue(api, "pq", "priority")
    push(api, "pq", {"items": [{"value": "lo", "priority": 1}, {"value": "hi", "priority": 9}]})
    assert claimed(api, "pq", end="max")["item"]["value"] == "hi"
    assert claimed(api, "pq", end="min")["item"]["value"] == "lo"


def test_claim_max_end_of_fifo_is_400(api):
    make_queue(api, "q")
    pushed(api, "q", 1)
    assert_error(claim(api, "q", end="max"), 400, "wrong_queue_kind")
    assert counts(api, "q") == (1, 0, 0, 0)


def test_claim_empty_is_204(api):
    make_queue(api, "q")
    assert_empty_204(claim(api, "q"))


def test_claim_missing_queue_is_404(api):
    assert_error(claim(api, "nope"), 404, "queue_not_found")
    assert_error(claim(api, "bad%20name"), 400, "invalid_queue_name")


@pytest.mark.parametrize(
    "body",
    [
        {"lease": 0},
        {"lease": -1},
        {"lease": 43_201},
        {"lease": 10**400},
        {"lease": "30"},
        {"lease": True},
        {"lease": None},
        {"wait": -0.5},
        {"wait": 20.5},
        {"wait": "1"},
        {"end": "middle"},
        {"end": None},
        {"leese": 5},
    ],
)
def test_claim_invalid_body_is_400_and_claims_nothing(api, body):
    make_queue(api, "q")
    pushed(api, "q", "kept")
    assert_error(claim(api, "q", **body), 400, "invalid")
    assert counts(api, "q") == (1, 0, 0, 0)


@pytest.mark.parametrize(
    "raw", ['{"lease": NaN}', '{"lease": Infinity}', '{"lease": -Infinity}', '{"wait": 1e400}', "[]"]
)
def test_claim_non_finite_numbers_are_400(api, raw):
    make_queue(api, "q")
    pushed(api, "q", "kept")
    response = api.post(queue_url("q", "claim"), data=raw, content_type="application/json")
    assert_error(response, 400)
    assert counts(api, "q") == (1, 0, 0, 0)


SPREAD = 3


def test_a_spread_claim_takes_one_of_the_first_k_ready_items(api):
    make_queue(api, "pq", "priority")
    push(api, "pq", {"items": [{"value": p, "priority": p} for p in range(8)]})
    ready = list(range(8))
    for _ in range(5):
        got = claimed(api, "pq", spread=SPREAD)["item"]["priority"]
        assert got in ready[:SPREAD], (got, ready)
        ready.remove(got)
    assert counts(api, "pq") == (3, 5, 0, 0)


def test_a_spread_claim_reaches_the_service(api, monkeypatch):
    """With the random pick pinned to the last candidate, spread=3 claims the third item: the
    field is passed to service.claim, not only parsed."""

    class Last:
        def choice(self, candidates: list) -> Any:
            return candidates[-1]

    monkeypatch.setattr(runtime, "PICK", Last())
    make_queue(api, "pq", "priority")
    push(api, "pq", {"items": [{"value": p, "priority": p} for p in range(5)]})
    assert claimed(api, "pq", spread=SPREAD)["item"]["priority"] == SPREAD - 1
    assert claimed(api, "pq")["item"]["priority"] == 0  # without spread: exact order


@pytest.mark.parametrize("spread", [1, 101, 0, -1, "x", "3", True, None, 2.5])
def test_claim_with_a_bad_spread_is_400_and_claims_nothing(api, spread):
    make_queue(api, "pq", "priority")
    pushed(api, "pq", "kept")
    body = assert_error(claim(api, "pq", spread=spread), 400, "invalid")
    assert set(body["errors"]) == {"spread"} and body["detail"].startswith("spread: "), body
    assert body["errors"]["spread"] != ["Unknown field."], body  # refused as a value, not as a name
    assert counts(api, "pq") == (1, 0, 0, 0)


def test_claim_with_wait_on_an_empty_queue_times_out_with_204(api):
    make_queue(api, "q")
    started = time.monotonic()
    assert_empty_204(claim(api, "q", wait=0.3))
    assert time.monotonic() - started >= 0.25


def test_claim_with_the_longest_wait_answers_at_once_when_an_item_is_there(api):
    make_queue(api, "q")
    pushed(api, "q", "here")
    started = time.monotonic()
    assert claimed(api, "q", wait=20)["item"]["value"] == "here"
    assert time.monotonic() - started < DEADLINE_SECONDS


# ----------------------------------------------------------------------------- ack


def test_ack_removes_the_item_for_good(api):
    make_queue(api, "q")
    pushed(api, "q", "done")
    lease = claimed(api, "q")
    assert_empty_204(post(api, "q", "ack", {"receipt": lease["receipt"]}))
    info = queue(api, "q")
    assert (info["size"], info["leased"], info["popped"]) == (0, 0, 1)
    assert_empty_204(claim(api, "q"))
    assert api.get(queue_url("q", "scheduled")).json()["results"] == []


def test_a_settled_lease_is_409_lease_not_found_but_to_a_repeated_ack(api):
    make_queue(api, "q")
    pushed(api, "q", "x")
    receipt = claimed(api, "q")["receipt"]
    assert_empty_204(post(api, "q", "ack", {"receipt": receipt}))
    assert_empty_204(post(api, "q", "ack", {"receipt": receipt}))  # answers as the first did
    assert_error(post(api, "q", "release", {"receipt": receipt}), 409, "lease_not_found")
    assert_error(post(api, "q", "extend", {"receipt": receipt, "lease": 5}), 409, "lease_not_found")


# ----------------------------------------------------------------------------- release


def test_release_makes_the_item_claimable_again(api):
    make_queue(api, "q")
    first = pushed(api, "q", "again")
    lease = claimed(api, "q")
    response = post(api, "q", "release", {"receipt": lease["receipt"]})
    assert response.status_code == 200, response.content
    assert response.json() == {"state": "ready"}
    assert counts(api, "q") == (1, 0, 0, 0)
    second = claimed(api, "q")
    assert second["item"]["id"] == first["id"]
    assert second["item"]["attempts"] == 2
    assert second["receipt"] != lease["receipt"]
    assert_error(post(api, "q", "ack", {"receipt": lease["receipt"]}), 409, "lease_not_found")
    assert_empty_204(post(api, "q", "ack", {"receipt": second["receipt"]}))


def test_release_keeps_the_item_at_its_place_in_queue_order(api):
    make_queue(api, "q")
    for value in ("first", "second"):
        pushed(api, "q", value)
    lease = claimed(api, "q")
    assert post(api, "q", "release", {"receipt": lease["receipt"]}).json() == {"state": "ready"}
    assert claimed(api, "q")["item"]["value"] == "first"


def test_release_with_a_delay(api):
    make_queue(api, "q")
    pushed(api, "q", "later")
    lease = claimed(api, "q")
    response = post(api, "q", "release", {"receipt": lease["receipt"], "delay": 600})
    assert response.status_code == 200 and response.json() == {"state": "delayed"}
    assert_empty_204(claim(api, "q"))
    assert counts(api, "q") == (0, 0, 1, 0)
    (row,) = api.get(queue_url("q", "scheduled")).json()["results"]
    assert (row["state"], row["id"], row["attempts"]) == ("delayed", lease["item"]["id"], 1)
    assert_about(row["visible_at"], 600)


def test_release_with_a_short_delay_comes_back(api):
    make_queue(api, "q")
    pushed(api, "q", "soon")
    lease = claimed(api, "q")
    assert post(api, "q", "release", {"receipt": lease["receipt"], "delay": SHORT}).json() == {"state": "delayed"}
    again = claim_when_visible(api, "q")
    assert again["item"]["id"] == lease["item"]["id"] and again["item"]["attempts"] == 2


@pytest.mark.parametrize("delay", [-1, "5", True, None, 10**400, 366 * 86_400 + 1])
def test_release_with_a_bad_delay_is_400_and_keeps_the_lease(api, delay):
    make_queue(api, "q")
    pushed(api, "q", "x")
    receipt = claimed(api, "q")["receipt"]
    assert_error(post(api, "q", "release", {"receipt": receipt, "delay": delay}), 400, "invalid")
    assert counts(api, "q") == (0, 1, 0, 0)
    assert_empty_204(post(api, "q", "ack", {"receipt": receipt}))


# ----------------------------------------------------------------------------- extend


def test_extend_moves_the_lease_end(api):
    make_queue(api, "q")
    pushed(api, "q", "slow job")
    lease = claimed(api, "q", lease=60)
    response = post(api, "q", "extend", {"receipt": lease["receipt"], "lease": 600})
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"receipt", "lease_expires_at"}
    assert body["receipt"] == lease["receipt"]
    assert when(body["lease_expires_at"]) > when(lease["lease_expires_at"])
    assert_about(body["lease_expires_at"], 600)
    (row,) = api.get(queue_url("q", "scheduled")).json()["results"]
    assert row["state"] == "leased" and when(row["visible_at"]) == when(body["lease_expires_at"])
    assert_empty_204(post(api, "q", "ack", {"receipt": body["receipt"]}))


def test_extend_can_shorten_a_lease_and_then_it_runs_out(api):
    make_queue(api, "q")
    pushed(api, "q", "x")
    lease = claimed(api, "q", lease=600)
    post(api, "q", "extend", {"receipt": lease["receipt"], "lease": SHORT})
    assert claim_when_visible(api, "q")["item"]["id"] == lease["item"]["id"]


@pytest.mark.parametrize("field", ["lease", "seconds"])  # seconds: the old name, still accepted
@pytest.mark.parametrize("seconds", [0, -1, 43_201, "5", True, None, 10**400])
def test_extend_with_a_bad_lease_is_400_and_keeps_the_lease(api, seconds, field):
    make_queue(api, "q")
    pushed(api, "q", "x")
    lease = claimed(api, "q", lease=600)
    assert_error(post(api, "q", "extend", {"receipt": lease["receipt"], field: seconds}), 400, "invalid")
    (row,) = api.get(queue_url("q", "scheduled")).json()["results"]
    assert when(row["visible_at"]) == when(lease["lease_expires_at"])


def test_extend_needs_lease(api):
    make_queue(api, "q")
    pushed(api, "q", "x")
    receipt = claimed(api, "q")["receipt"]
    body = assert_error(post(api, "q", "extend", {"receipt": receipt}), 400, "invalid")
    assert "lease" in body["errors"]


# ----------------------------------------------------------------------------- leases running out


def test_an_expired_lease_comes_back_and_its_receipt_is_over(api):
    make_queue(api, "q")
    first = pushed(api, "q", "retry me")
    lease = claimed(api, "q", lease=SHORT)
    again = claim_when_visible(api, "q", lease=60)
    assert again["item"]["id"] == first["id"]
    assert again["item"]["attempts"] == 2
    assert_error(post(api, "q", "ack", {"receipt": lease["receipt"]}), 409, "lease_not_found")
    assert_empty_204(post(api, "q", "ack", {"receipt": again["receipt"]}))
    assert counts(api, "q") == (0, 0, 0, 0)


def test_an_expired_lease_nobody_touched_is_409_lease_expired_and_changes_nothing(api):
    make_queue(api, "q")
    first = pushed(api, "q", "late")
    lease = claimed(api, "q", lease=SHORT)
    wait_until(when(lease["lease_expires_at"]))
    receipt = {"receipt": lease["receipt"]}
    assert_error(post(api, "q", "ack", receipt), 409, "lease_expired")
    assert_error(post(api, "q", "release", receipt), 409, "lease_expired")
    assert_error(post(api, "q", "extend", {**receipt, "lease": 60}), 409, "lease_expired")
    # The refused ack removed nothing: the item is delivered again.
    assert claimed(api, "q")["item"]["id"] == first["id"]


# ----------------------------------------------------------------------------- receipts that are not ours


@pytest.mark.parametrize("receipt", ["", "abc", "not a receipt!", "x" * 2001, 5, None, ["r"], {"r": 1}])
@pytest.mark.parametrize("action", ["ack", "release", "extend"])
def test_malformed_receipts_are_400_invalid_receipt(api, action, receipt):
    make_queue(api, "q")
    pushed(api, "q", "x")
    lease = claimed(api, "q")
    body: dict[str, Any] = {"receipt": receipt}
    if action == "extend":
        body["lease"] = 5
    assert_error(post(api, "q", action, body), 400, "invalid_receipt")
    assert counts(api, "q") == (0, 1, 0, 0)
    assert_empty_204(post(api, "q", "ack", {"receipt": lease["receipt"]}))


@pytest.mark.parametrize("action", ["ack", "release", "extend"])
def test_a_receipt_is_required(api, action):
    make_queue(api, "q")
    body = assert_error(post(api, "q", action, {"lease": 5} if action == "extend" else {}), 400, "invalid")
    assert "receipt" in body["errors"]


def _forgeries(receipt: str) -> list[str]:
    """Receipts that look like ours but were not handed out: the token's last characters changed."""
    tweak = "A" if receipt[-1] != "A" else "B"
    return [receipt[:-1] + tweak, receipt[:-4] + receipt[-4:][::-1], receipt + "AAAA", receipt[4:]]


@pytest.mark.parametrize("action", ["ack", "release", "extend"])
def test_forged_receipts_are_refused_and_change_nothing(api, action):
    make_queue(api, "q")
    pushed(api, "q", "x")
    lease = claimed(api, "q", lease=600)
    for forged in _forgeries(lease["receipt"]):
        if forged == lease["receipt"]:
            continue
        body: dict[str, Any] = {"receipt": forged, "lease": 5} if action == "extend" else {"receipt": forged}
        response = post(api, "q", action, body)
        # Not decodable: invalid_receipt; decodable but with a token no claim handed out: no such lease.
        assert response.status_code in (400, 409), (forged, response.content)
        assert_error(
            response, response.status_code, "invalid_receipt" if response.status_code == 400 else "lease_not_found"
        )
    (row,) = api.get(queue_url("q", "scheduled")).json()["results"]
    assert when(row["visible_at"]) == when(lease["lease_expires_at"])
    assert_empty_204(post(api, "q", "ack", {"receipt": lease["receipt"]}))


@pytest.mark.parametrize("action", ["ack", "release", "extend"])
def test_a_receipt_of_another_queue_is_400_invalid_receipt(api, action):
    make_queue(api, "mine")
    make_queue(api, "other")
    pushed(api, "mine", "x")
    pushed(api, "other", "y")
    lease = claimed(api, "mine")
    body: dict[str, Any] = (
        {"receipt": lease["receipt"], "lease": 5} if action == "extend" else {"receipt": lease["receipt"]}
    )
    assert_error(post(api, "other", action, body), 400, "invalid_receipt")
    assert_error(post(api, "nope", action, body), 400, "invalid_receipt")
    assert counts(api, "mine") == (0, 1, 0, 0)
    assert counts(api, "other") == (1, 0, 0, 0)
    assert_empty_204(post(api, "mine", "ack", {"receipt": lease["receipt"]}))


def test_a_receipt_from_a_deleted_queue(api):
    make_queue(api, "q")
    pushed(api, "q", "x")
    receipt = claimed(api, "q")["receipt"]
    assert_empty_204(api.delete(queue_url("q")))
    assert_error(post(api, "q", "ack", {"receipt": receipt}), 404, "queue_not_found")
    make_queue(api, "q")  # same name, new queue: the old lease is not in it
    assert_error(post(api, "q", "ack", {"receipt": receipt}), 409, "lease_not_found")


# ----------------------------------------------------------------------------- long polling


@pytest.fixture
def asleep(monkeypatch) -> threading.Event:
    """Set when a waiting pop or claim goes to sleep on its watch (service/waiting.py)."""

    event = threading.Event()
    real = runtime.wait_on

    def wait_on(watch: Any, seconds: float) -> bool:
        event.set()
        return real(watch, seconds)

    monkeypatch.setattr(runtime, "wait_on", wait_on)
    return event


def _push_when_set(event: threading.Event, db: Any, name: str, value: Any) -> tuple[threading.Thread, list]:
    """A thread that pushes ``value`` once ``event`` is set; errors land in the returned list."""
    from django_fdbqueue import service

    errors: list[BaseException] = []

    def run() -> None:
        try:
            assert event.wait(DEADLINE_SECONDS), "the request never started waiting"
            service.push(db, name, value)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_a_long_poll_pop_wakes_when_another_thread_pushes(api, fdbqueue_db, asleep):
    make_queue(api, "q")
    thread, errors = _push_when_set(asleep, fdbqueue_db, "q", {"woke": True})
    started = time.monotonic()
    response = api.post(queue_url("q", "pop") + "?wait=15")
    elapsed = time.monotonic() - started
    thread.join(DEADLINE_SECONDS)
    assert not thread.is_alive() and not errors, errors
    assert response.status_code == 200, response.content
    assert response.json()["value"] == {"woke": True}
    assert asleep.is_set()  # it did wait, and the push woke it long before the 15 s were up
    assert elapsed < 12


def test_a_long_poll_claim_wakes_when_another_thread_pushes(api, fdbqueue_db, asleep):
    make_queue(api, "q")
    thread, errors = _push_when_set(asleep, fdbqueue_db, "q", "job")
    started = time.monotonic()
    response = claim(api, "q", wait=15, lease=60)
    elapsed = time.monotonic() - started
    thread.join(DEADLINE_SECONDS)
    assert not thread.is_alive() and not errors, errors
    assert response.status_code == 200, response.content
    assert response.json()["item"]["value"] == "job" and response.json()["item"]["attempts"] == 1
    assert elapsed < 12
    assert counts(api, "q") == (0, 1, 0, 0)


def test_a_long_poll_pop_times_out_with_204(api):
    make_queue(api, "q")
    started = time.monotonic()
    assert_empty_204(api.post(queue_url("q", "pop") + "?wait=0.3"))
    assert time.monotonic() - started >= 0.25


def test_pop_wait_0_answers_at_once_and_20_is_allowed(api):
    make_queue(api, "q")
    assert_empty_204(api.post(queue_url("q", "pop") + "?wait=0"))
    pushed(api, "q", "there")
    response = api.post(queue_url("q", "pop") + "?wait=20")
    assert response.status_code == 200 and response.json()["value"] == "there"
    assert set(response.json()) == ITEM_FIELDS


def test_pop_with_wait_takes_a_delayed_item_when_it_becomes_visible(api):
    make_queue(api, "q")
    pushed(api, "q", "soon", delay=SHORT)
    response = api.post(queue_url("q", "pop") + "?wait=10")
    assert response.status_code == 200 and response.json()["value"] == "soon"


@pytest.mark.parametrize(
    "wait", ["-1", "20.001", "21", "nan", "NaN", "inf", "-inf", "1e999", "abc", " 1", "1_0", "0x10"]
)
def test_pop_with_a_bad_wait_is_400_and_pops_nothing(api, wait):
    from urllib.parse import quote

    make_queue(api, "q")
    pushed(api, "q", "kept")
    assert_error(api.post(queue_url("q", "pop") + "?wait=" + quote(wait)), 400, "invalid")
    assert counts(api, "q") == (1, 0, 0, 0)


def test_an_empty_wait_is_the_default_as_for_every_query_parameter(api):
    make_queue(api, "q")
    started = time.monotonic()
    assert_empty_204(api.post(queue_url("q", "pop") + "?wait="))
    assert time.monotonic() - started < DEADLINE_SECONDS


def test_api_max_wait_is_20_seconds():
    from django_fdbqueue.api import serializers, views

    assert serializers.MAX_WAIT_SECONDS == views.MAX_WAIT_SECONDS == 20


# ----------------------------------------------------------------------------- push: dedup


def test_a_duplicate_push_is_200_with_the_stored_item(api):
    make_queue(api, "q")
    first = push(api, "q", {"value": "v1", "dedup_key": "order-17"})
    assert first.status_code == 201
    assert first.json()["duplicate"] is False
    again = push(api, "q", {"value": "v2", "dedup_key": "order-17"})
    assert again.status_code == 200, again.content
    body = again.json()
    assert set(body) == PUSHED_FIELDS
    assert body["duplicate"] is True
    assert body["id"] == first.json()["id"] and body["enqueued_at"] == first.json()["enqueued_at"]
    assert body == {**first.json(), "duplicate": True}  # the stored item, not the value sent ("v2")
    assert counts(api, "q") == (1, 0, 0, 0)
    assert queue(api, "q")["pushed"] == 1
    other = push(api, "q", {"value": "v3", "dedup_key": "order-18"})
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


def test_dedup_holds_while_leased_and_after_consumption(api):
    make_queue(api, "q")
    first = pushed(api, "q", "x", dedup_key="k")
    lease = claimed(api, "q")
    assert push(api, "q", {"value": "x", "dedup_key": "k"}).status_code == 200
    post(api, "q", "ack", {"receipt": lease["receipt"]})
    again = push(api, "q", {"value": "y", "dedup_key": "k"})
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert again.json()["value"] is None  # consumed: its value is no longer stored
    assert counts(api, "q") == (0, 0, 0, 0)


def test_dedup_with_a_delay_keeps_the_first_schedule(api):
    make_queue(api, "q")
    first = pushed(api, "q", "x", dedup_key="k", delay=600)
    again = push(api, "q", {"value": "x", "dedup_key": "k"})
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert counts(api, "q") == (0, 0, 1, 0)


@pytest.mark.parametrize("key", ["", "k" * 201, 5, None, True, ["k"]])
def test_push_with_a_bad_dedup_key_is_400_and_stores_nothing(api, key):
    make_queue(api, "q")
    body = assert_error(push(api, "q", {"value": 1, "dedup_key": key}), 400, "invalid")
    assert "dedup_key" in body["errors"]
    assert queue(api, "q")["pushed"] == 0


def test_push_dedup_key_edges(api):
    make_queue(api, "q")
    assert push(api, "q", {"value": 1, "dedup_key": "k" * 200}).status_code == 201
    assert push(api, "q", {"value": 1, "dedup_key": " spaced \n"}).status_code == 201
    assert push(api, "q", {"value": 1, "dedup_key": "spaced"}).status_code == 201  # taken as sent
    lone = api.post(
        queue_url("q", "push"), data='{"value": 1, "dedup_key": "\\ud800"}', content_type="application/json"
    )
    assert_error(lone, 400, "invalid")
    assert queue(api, "q")["pushed"] == 3


def test_a_batch_takes_no_dedup_key(api):
    make_queue(api, "q")
    body = assert_error(push(api, "q", {"items": [{"value": 1}], "dedup_key": "k"}), 400, "invalid")
    assert "dedup_key" in body["errors"]
    assert_error(push(api, "q", {"items": [{"value": 1, "dedup_key": "k"}]}), 400, "invalid")
    assert queue(api, "q")["pushed"] == 0


# ----------------------------------------------------------------------------- push: delay and not_before


def test_push_with_a_delay_is_invisible_until_then(api):
    make_queue(api, "q")
    item = pushed(api, "q", "later", delay=600)
    assert (item["attempts"], item["duplicate"]) == (0, False)
    assert_empty_204(api.post(queue_url("q", "pop")))
    assert_empty_204(claim(api, "q"))
    assert_empty_204(api.get(queue_url("q", "peek")))
    assert counts(api, "q") == (0, 0, 1, 0)
    (row,) = api.get(queue_url("q", "scheduled")).json()["results"]
    assert row["id"] == item["id"] and row["state"] == "delayed"
    assert_about(row["visible_at"], 600)


def test_push_with_a_short_delay_becomes_visible(api):
    make_queue(api, "q")
    item = pushed(api, "q", "soon", delay=SHORT)

    def pop() -> dict | None:
        response = api.post(queue_url("q", "pop"))
        return response.json() if response.status_code == 200 else None

    assert poll(pop, "the delayed item")["id"] == item["id"]


def test_push_with_delay_0_is_visible_at_once(api):
    make_queue(api, "q")
    pushed(api, "q", "now", delay=0)
    assert api.post(queue_url("q", "pop")).json()["value"] == "now"


def test_push_not_before(api):
    make_queue(api, "q")
    future = (now() + datetime.timedelta(hours=1)).replace(microsecond=0)
    later = pushed(api, "q", "later", not_before=future.isoformat())
    (row,) = api.get(queue_url("q", "scheduled")).json()["results"]
    assert row["id"] == later["id"] and when(row["visible_at"]) == future
    in_paris = future.astimezone(datetime.timezone(datetime.timedelta(hours=2))).isoformat()
    pushed(api, "q", "same time, other offset", not_before=in_paris)
    rows = api.get(queue_url("q", "scheduled")).json()["results"]
    assert [when(r["visible_at"]) for r in rows] == [future, future]
    past = (now() - datetime.timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    pushed(api, "q", "already due", not_before=past)
    assert api.post(queue_url("q", "pop")).json()["value"] == "already due"


@pytest.mark.parametrize(
    "extra",
    [
        {"delay": -1},
        {"delay": "5"},
        {"delay": True},
        {"delay": None},
        {"delay": 10**400},
        {"delay": 366 * 86_400 + 1},
        {"not_before": "2030-01-01T00:00:00"},
        {"not_before": "2030-01-01"},
        {"not_before": "soon"},
        {"not_before": 1_900_000_000},
        {"not_before": None},
        {"not_before": "2030-02-30T00:00:00Z"},
        {"not_before": "0001-01-01T00:00:00+01:00"},
        {"not_before": "2999-01-01T00:00:00Z"},
        {"delay": 5, "not_before": "2030-01-01T00:00:00Z"},
    ],
)
def test_push_with_a_bad_schedule_is_400_and_stores_nothing(api, extra):
    make_queue(api, "q")
    assert_error(push(api, "q", {"value": 1, **extra}), 400)
    assert_error(push(api, "q", {"items": [{"value": 1}], **extra}), 400)
    assert counts(api, "q") == (0, 0, 0, 0) and queue(api, "q")["pushed"] == 0


def test_naive_not_before_says_to_give_the_time_zone(api):
    make_queue(api, "q")
    body = assert_error(push(api, "q", {"value": 1, "not_before": "2030-01-01T00:00:00"}), 400, "invalid")
    assert "time zone" in body["errors"]["not_before"][0]


def test_batch_push_with_a_delay_delays_every_item(api):
    make_queue(api, "pq", "priority")
    response = push(api, "pq", {"items": [{"value": "a", "priority": 2}, {"value": "b"}], "delay": 600})
    assert response.status_code == 201, response.content
    items = response.json()["items"]
    assert all(set(i) == PUSHED_FIELDS and i["duplicate"] is False for i in items)
    assert counts(api, "pq") == (0, 0, 2, 0)
    rows = api.get(queue_url("pq", "scheduled")).json()["results"]
    assert {r["id"] for r in rows} == {i["id"] for i in items}
    assert {r["state"] for r in rows} == {"delayed"}


def test_batch_push_with_not_before_and_a_delay_inside_an_item(api):
    make_queue(api, "q")
    future = (now() + datetime.timedelta(hours=1)).isoformat()
    assert push(api, "q", {"items": [{"value": 1}, {"value": 2}], "not_before": future}).status_code == 201
    assert counts(api, "q") == (0, 0, 2, 0)
    assert_error(push(api, "q", {"items": [{"value": 3, "delay": 5}]}), 400, "invalid")
    assert queue(api, "q")["pushed"] == 2


# ----------------------------------------------------------------------------- scheduled


def test_scheduled_lists_leased_and_delayed_items_by_visibility_and_pages(api):
    make_queue(api, "q")
    pushed(api, "q", "leased")
    lease = claimed(api, "q", lease=300)
    pushed(api, "q", "sooner", delay=100)
    pushed(api, "q", "later", delay=500)
    pushed(api, "q", "ready")
    response = api.get(queue_url("q", "scheduled"))
    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    assert [(r["value"], r["state"]) for r in body["results"]] == [
        ("sooner", "delayed"),
        ("leased", "leased"),
        ("later", "delayed"),
    ]
    for row in body["results"]:
        assert set(row) == ITEM_FIELDS | {"state", "visible_at"}
    assert body["results"][1]["attempts"] == 1
    assert when(body["results"][1]["visible_at"]) == when(lease["lease_expires_at"])

    assert values_of_every_page(api, queue_url("q", "scheduled") + "?limit=2") == (["sooner", "leased", "later"], 2)


def test_scheduled_of_a_queue_with_nothing_hidden(api):
    make_queue(api, "q")
    pushed(api, "q", "ready")
    assert api.get(queue_url("q", "scheduled")).json() == {"next": None, "results": []}


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "limit=x", "cursor=garbage%21"])
def test_scheduled_bad_query_is_400(api, query):
    make_queue(api, "q")
    assert_error(api.get(queue_url("q", "scheduled") + "?" + query), 400)


def test_scheduled_cursor_of_another_listing_is_400(api):
    make_queue(api, "q")
    for n in range(3):
        pushed(api, "q", n)
    items_next = api.get(queue_url("q", "items") + "?limit=1").json()["next"]
    cursor = items_next.split("cursor=")[1].split("&")[0]
    assert_error(api.get(queue_url("q", "scheduled"), {"cursor": cursor}), 400, "invalid_cursor")
    assert_error(api.get(queue_url("q", "dead-letters"), {"cursor": cursor}), 400, "invalid_cursor")


def test_scheduled_missing_queue_is_404(api):
    assert_error(api.get(queue_url("nope", "scheduled")), 404, "queue_not_found")


# ----------------------------------------------------------------------------- dead letters


def _kill(api: APIClient, name: str, value: Any) -> dict:
    """Push, claim and release an item on a queue with max_attempts=1: it dies. Returns the item."""
    item = pushed(api, name, value)
    lease = claimed(api, name)
    assert post(api, name, "release", {"receipt": lease["receipt"]}).json() == {"state": "dead"}
    return item


def test_release_after_max_attempts_makes_a_dead_letter(api):
    make_queue(api, "q", max_attempts=1)
    item = _kill(api, "q", {"poison": True})
    assert counts(api, "q") == (0, 0, 0, 1)
    assert_empty_204(claim(api, "q"))
    response = api.get(queue_url("q", "dead-letters"))
    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    (letter,) = body["results"]
    assert set(letter) == ITEM_FIELDS | {"died_at"}
    assert (letter["id"], letter["value"], letter["attempts"]) == (item["id"], {"poison": True}, 1)
    assert_about(letter["died_at"], 0)


def test_an_expired_lease_after_max_attempts_dies(api):
    make_queue(api, "q", max_attempts=2)
    item = pushed(api, "q", "poison")
    claimed(api, "q", lease=SHORT)
    assert claim_when_visible(api, "q", lease=SHORT)["item"]["attempts"] == 2

    def dead() -> list:
        assert_empty_204(claim(api, "q"))  # a claim moves expired leases on
        return api.get(queue_url("q", "dead-letters")).json()["results"]

    (letter,) = poll(dead, "the item to die")
    assert (letter["id"], letter["attempts"]) == (item["id"], 2)
    assert counts(api, "q") == (0, 0, 0, 1)


def test_requeue_a_dead_letter(api):
    make_queue(api, "q", max_attempts=1)
    item = _kill(api, "q", "again")
    response = api.post(dead_letter_url("q", item["id"], "requeue"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == ITEM_FIELDS
    assert (body["id"], body["value"], body["attempts"]) == (item["id"], "again", 0)
    assert counts(api, "q") == (1, 0, 0, 0)
    assert claimed(api, "q")["item"]["id"] == item["id"]
    again = api.post(dead_letter_url("q", item["id"], "requeue"))  # repeated: as the first did
    assert again.status_code == 200 and again.json() == body
    assert_error(api.delete(dead_letter_url("q", item["id"])), 404, "dead_letter_not_found")


def test_a_requeued_dead_letter_returns_to_its_place(api):
    make_queue(api, "q", max_attempts=1)
    first = _kill(api, "q", "first")
    pushed(api, "q", "second")
    api.post(dead_letter_url("q", first["id"], "requeue"))
    assert claimed(api, "q")["item"]["value"] == "first"


def test_delete_a_dead_letter(api):
    make_queue(api, "q", max_attempts=1)
    item = _kill(api, "q", "gone")
    assert_empty_204(api.delete(dead_letter_url("q", item["id"])))
    assert counts(api, "q") == (0, 0, 0, 0)
    assert api.get(queue_url("q", "dead-letters")).json()["results"] == []
    assert_empty_204(api.delete(dead_letter_url("q", item["id"])))  # repeated: as the first did
    assert_error(api.post(dead_letter_url("q", item["id"], "requeue")), 404, "dead_letter_not_found")


def test_an_id_that_is_not_a_dead_letter_is_404(api):
    make_queue(api, "q", max_attempts=1)
    ready = pushed(api, "q", "alive")
    assert_error(api.delete(dead_letter_url("q", ready["id"])), 404, "dead_letter_not_found")
    assert_error(api.post(dead_letter_url("q", ready["id"], "requeue")), 404, "dead_letter_not_found")
    assert counts(api, "q") == (1, 0, 0, 0)


@pytest.mark.parametrize("item_id", ["garbage", "%21%21", "AAAA", "x" * 3000, "~.", "a.b"])
def test_garbage_item_ids_are_400_and_change_nothing(api, item_id):
    make_queue(api, "q", max_attempts=1)
    _kill(api, "q", "dead")
    assert_error(api.delete(dead_letter_url("q", item_id)), 400, "invalid_argument")
    assert_error(api.post(dead_letter_url("q", item_id, "requeue")), 400, "invalid_argument")
    assert counts(api, "q") == (0, 0, 0, 1)


def test_dead_letters_of_a_missing_queue_are_404(api):
    make_queue(api, "q", max_attempts=1)
    item = _kill(api, "q", "x")
    assert_error(api.get(queue_url("nope", "dead-letters")), 404, "queue_not_found")
    assert_error(api.delete(dead_letter_url("nope", item["id"])), 404, "queue_not_found")
    assert_error(api.post(dead_letter_url("nope", item["id"], "requeue")), 404, "queue_not_found")


def test_dead_letters_page_in_queue_order(api):
    make_queue(api, "pq", "priority", max_attempts=1)
    for value, priority in [("c", 3), ("a", 1), ("b", 2)]:
        push(api, "pq", {"value": value, "priority": priority})
    for _ in range(3):
        lease = claimed(api, "pq", end="max")
        post(api, "pq", "release", {"receipt": lease["receipt"]})
    assert values_of_every_page(api, queue_url("pq", "dead-letters") + "?limit=2") == (["a", "b", "c"], 2)


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "limit=-3", "cursor=garbage%21"])
def test_dead_letters_bad_query_is_400(api, query):
    make_queue(api, "q")
    assert_error(api.get(queue_url("q", "dead-letters") + "?" + query), 400)


def test_wrong_methods_are_405(api):
    make_queue(api, "q", max_attempts=1)
    item = _kill(api, "q", "x")
    assert_error(api.get(queue_url("q", "claim")), 405)
    assert_error(api.get(queue_url("q", "ack")), 405)
    assert_error(api.post(queue_url("q", "scheduled")), 405)
    assert_error(api.post(queue_url("q", "dead-letters")), 405)
    assert_error(api.get(dead_letter_url("q", item["id"], "requeue")), 405)
    assert_error(api.post(dead_letter_url("q", item["id"])), 405)
    assert counts(api, "q") == (0, 0, 0, 1)


# ----------------------------------------------------------------------------- a worker's whole loop


def test_at_least_once_loop(api):
    """Claim, fail once (release), claim again, ack: each item delivered until acked, then gone."""
    make_queue(api, "jobs", max_attempts=3)
    push(api, "jobs", {"items": [{"value": n} for n in range(3)]})
    done: list[int] = []
    failed_once: set[int] = set()
    for _ in range(10):
        response = claim(api, "jobs", lease=60)
        if response.status_code == 204:
            break
        lease = response.json()
        value = lease["item"]["value"]
        if value not in failed_once:
            failed_once.add(value)
            assert post(api, "jobs", "release", {"receipt": lease["receipt"]}).json()["state"] == "ready"
            continue
        assert lease["item"]["attempts"] == 2
        assert_empty_204(post(api, "jobs", "ack", {"receipt": lease["receipt"]}))
        done.append(value)
    assert sorted(done) == [0, 1, 2]
    assert counts(api, "jobs") == (0, 0, 0, 0)


# ----------------------------------------------------------------------------- auth and the database failing

RECEIPT_BODY = {"receipt": "r", "lease": 5}
NEW_ROUTES = [
    ("patch", queue_url("q"), {"max_attempts": 2}),
    ("post", queue_url("q", "claim"), {}),
    ("post", queue_url("q", "ack"), {"receipt": "r"}),
    ("post", queue_url("q", "release"), {"receipt": "r"}),
    ("post", queue_url("q", "extend"), RECEIPT_BODY),
    ("get", queue_url("q", "scheduled"), None),
    ("get", queue_url("q", "dead-letters"), None),
    ("post", dead_letter_url("q", "ID", "requeue"), None),
    ("delete", dead_letter_url("q", "ID"), None),
    ("post", queue_url("q", "pop") + "?wait=1", None),
]


@pytest.mark.parametrize(("method", "url", "body"), NEW_ROUTES)
def test_anonymous_is_refused(api, anonymous, method, url, body):
    make_queue(api, "q", max_attempts=1)
    dead = _kill(api, "q", "secret")
    pushed(api, "q", "ready")
    response = getattr(anonymous, method)(url.replace("ID", dead["id"]), body, format="json")
    assert response.status_code in (401, 403)
    assert_error(response, response.status_code)
    info = queue(api, "q")
    assert (info["size"], info["leased"], info["dead"], info["max_attempts"]) == (1, 0, 1, 1)


@pytest.mark.parametrize(
    ("method", "url", "body", "function"),
    [
        ("patch", queue_url("q"), {"max_attempts": 2}, "set_max_attempts"),
        ("post", queue_url("q", "claim"), {}, "claim"),
        ("post", queue_url("q", "ack"), {"receipt": "r"}, "ack"),
        ("post", queue_url("q", "release"), {"receipt": "r"}, "release"),
        ("post", queue_url("q", "extend"), RECEIPT_BODY, "extend"),
        ("get", queue_url("q", "scheduled"), None, "scheduled"),
        ("get", queue_url("q", "dead-letters"), None, "dead_letters"),
        ("post", dead_letter_url("q", "ID", "requeue"), None, "requeue_dead_letter"),
        ("delete", dead_letter_url("q", "ID"), None, "delete_dead_letter"),
        ("post", queue_url("q", "pop") + "?wait=1", None, "pop"),
    ],
)
def test_a_timed_out_database_is_503(api, monkeypatch, method, url, body, function):
    from django_fdbqueue import service
    from django_fdbqueue.fdbapi import ErrorCode, make_error

    make_queue(api, "q")

    def timed_out(*args: Any, **kwargs: Any) -> Any:
        raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)

    monkeypatch.setattr(service, function, timed_out)
    response = getattr(api, method)(url, body, format="json")
    body = assert_error(response, 503, "database_unavailable")
    assert body["fdb_error"] == 1031 and int(response["Retry-After"]) >= 1


def test_bodies_over_data_upload_max_memory_size_are_413(api, settings):
    make_queue(api, "q")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    big = "x" * 200
    assert_error(post(api, "q", "ack", {"receipt": big}), 413, "request_too_large")
    assert_error(post(api, "q", "claim", {"end": big}), 413, "request_too_large")
    assert_error(api.patch(queue_url("q"), {"max_attempts": 2, "pad": big}, format="json"), 413, "request_too_large")


# ----------------------------------------------------------------------------- issue 17: contract and names


def test_a_lease_that_is_gone_says_so_in_one_field_whatever_the_code(api):
    """Both 409 codes carry "lease_gone": true and a "reason", so a client checks one field."""
    make_queue(api, "q")
    pushed(api, "q", "x")
    short = claimed(api, "q", lease=SHORT)
    wait_until(when(short["lease_expires_at"]))
    for action, extra in (("ack", {}), ("release", {}), ("extend", {"lease": 60})):
        body = assert_error(post(api, "q", action, {"receipt": short["receipt"], **extra}), 409, "lease_expired")
        assert (body["lease_gone"], body["reason"]) == (True, "expired"), body
    again = claimed(api, "q")
    assert_empty_204(post(api, "q", "ack", {"receipt": again["receipt"]}))
    for receipt in (short["receipt"], again["receipt"]):
        for action, extra in (("ack", {}), ("release", {}), ("extend", {"lease": 60})):
            if receipt == again["receipt"] and action == "ack":
                continue  # a repeated ack answers as the first did
            body = assert_error(post(api, "q", action, {"receipt": receipt, **extra}), 409, "lease_not_found")
            assert (body["lease_gone"], body["reason"]) == (True, "not_found"), body
    assert "lease_gone" not in assert_error(api.post(API, {"name": "q"}, format="json"), 409, "queue_already_exists")


def test_extend_takes_lease_as_claim_does_and_still_its_old_name_seconds(api):
    make_queue(api, "q")
    pushed(api, "q", "x")
    lease = claimed(api, "q", lease=5)
    response = post(api, "q", "extend", {"receipt": lease["receipt"], "seconds": 600})  # deprecated
    assert response.status_code == 200, response.content
    assert_about(response.json()["lease_expires_at"], 600)
    response = post(api, "q", "extend", {"receipt": lease["receipt"], "lease": 60})
    assert response.status_code == 200 and set(response.json()) == {"receipt", "lease_expires_at"}
    assert_about(response.json()["lease_expires_at"], 60)
    both = {"receipt": lease["receipt"], "lease": 60, "seconds": 60}
    assert "not both" in assert_error(post(api, "q", "extend", both), 400, "invalid")["detail"]
    (row,) = api.get(queue_url("q", "scheduled")).json()["results"]
    assert when(row["visible_at"]) == when(response.json()["lease_expires_at"])  # the refused call changed nothing


def _delete_when_set(event: threading.Event, db: Any, name: str) -> tuple[threading.Thread, list]:
    """A thread that deletes queue ``name`` once ``event`` is set; errors land in the returned list."""
    from django_fdbqueue import service

    errors: list[BaseException] = []

    def run() -> None:
        try:
            assert event.wait(DEADLINE_SECONDS), "the request never started waiting"
            service.delete_queue(db, name)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


@pytest.mark.parametrize("action", ["pop", "claim"])
def test_a_long_poll_on_a_queue_deleted_meanwhile_is_404_at_once(api, fdbqueue_db, asleep, action):
    """Not a 204 after the whole wait: the deletion wakes the waiting request."""
    make_queue(api, "q")  # never pushed to: no wake-up key for the deletion to change
    thread, errors = _delete_when_set(asleep, fdbqueue_db, "q")
    started = time.monotonic()
    if action == "pop":
        response = api.post(queue_url("q", "pop") + "?wait=20")
    else:
        response = claim(api, "q", wait=20)
    elapsed = time.monotonic() - started
    thread.join(DEADLINE_SECONDS)
    assert not thread.is_alive() and not errors, errors
    assert_error(response, 404, "queue_not_found")
    assert asleep.is_set() and elapsed < 12
