"""The REST API of per-key limits: a push's key, a queue's key_concurrency and key_rate, the
key-limits sub-route, and 400s with nothing stored for bad input."""

from __future__ import annotations

import pytest

from .api_helpers import API, assert_error, make_queue, push, queue_url
from .api_helpers import api, user  # noqa: F401 - fixtures, found by name (api needs user)

pytestmark = pytest.mark.django_db


def claim(api, name):
    return api.post(queue_url(name, "claim"), {}, format="json")


def test_limits_on_create_and_patch(api):
    created = make_queue(api, "q", key_concurrency=2, key_rate=1.5)
    assert (created["key_concurrency"], created["key_rate"]) == (2, 1.5)
    assert make_queue(api, "free")["key_concurrency"] is None
    response = api.patch(queue_url("q"), {"key_rate": None, "max_attempts": 3}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["key_concurrency"], body["key_rate"], body["max_attempts"]) == (2, None, 3)
    body = api.get(queue_url("q")).json()
    assert (body["key_concurrency"], body["key_rate"], body["max_attempts"]) == (2, None, 3)


@pytest.mark.parametrize(
    "body",
    [
        {"key_concurrency": 0},
        {"key_concurrency": -1},
        {"key_concurrency": 1.5},
        {"key_concurrency": "2"},
        {"key_concurrency": True},
        {"key_rate": 0},
        {"key_rate": -2},
        {"key_rate": "1"},
        {"key_rate": True},
    ],
)
def test_bad_limits_are_400_and_store_nothing(api, body):
    assert_error(api.post(API, {"name": "q", **body}, format="json"), 400, "invalid")
    assert api.get(API).json()["results"] == []
    make_queue(api, "q", key_concurrency=4, key_rate=2)
    assert_error(api.patch(queue_url("q"), {**body, "max_attempts": 9}, format="json"), 400, "invalid")
    info = api.get(queue_url("q")).json()
    assert (info["key_concurrency"], info["key_rate"], info["max_attempts"]) == (4, 2.0, None)


@pytest.mark.parametrize("key", ["", "x" * 101, "é" * 51, 12, None])
def test_a_bad_key_is_400_and_stores_nothing(api, key):
    make_queue(api, "q", key_concurrency=1)
    assert_error(push(api, "q", {"value": 1, "key": key}), 400, "invalid")
    assert_error(push(api, "q", {"items": [{"value": 1}], "key": key}), 400, "invalid")
    assert api.get(queue_url("q")).json()["pushed"] == 0


def test_claims_skip_a_busy_key_and_the_state_shows_it(api):
    make_queue(api, "q", key_concurrency=1)
    assert push(api, "q", {"value": "a1", "key": "a"}).status_code == 201
    assert push(api, "q", {"items": [{"value": "a2"}, {"value": "a3"}], "key": "a"}).status_code == 201
    assert push(api, "q", {"value": "b1", "key": "é" * 50}).status_code == 201
    first = claim(api, "q")
    assert first.json()["item"]["value"] == "a1"
    assert claim(api, "q").json()["item"]["value"] == "b1"
    assert claim(api, "q").status_code == 204  # a2 and a3 wait for a's slot
    state = api.get(queue_url("q", "key-limits")).json()
    assert state == {
        "name": "q",
        "concurrency": 1,
        "rate": None,
        "keys_leased": 2,
        "leased": [{"key": "a", "leased": 1}, {"key": "é" * 50, "leased": 1}],
        "at_limit": ["a", "é" * 50],
    }
    assert api.get(queue_url("q", "key-limits") + "?top=1").json()["leased"] == [{"key": "a", "leased": 1}]
    assert_error(api.get(queue_url("q", "key-limits") + "?top=0"), 400, "invalid")
    receipt = first.json()["receipt"]
    assert api.post(queue_url("q", "ack"), {"receipt": receipt}, format="json").status_code == 204
    assert claim(api, "q").json()["item"]["value"] == "a2"


def test_key_limits_of_a_missing_queue_is_404(api):
    assert_error(api.get(queue_url("nope", "key-limits")), 404, "queue_not_found")


def test_a_lease_that_ran_out_counts_until_taken_back_and_the_schema_says_so(api, clock):
    """Issue 28: the state and the queue's `leased` read counters, as their field help tells."""
    make_queue(api, "q", key_concurrency=1)
    assert push(api, "q", {"value": "a1", "key": "a"}).status_code == 201
    assert api.post(queue_url("q", "claim"), {"lease": 5}, format="json").status_code == 200
    clock.advance(6)
    assert api.get(queue_url("q", "key-limits")).json()["at_limit"] == ["a"]
    assert api.get(queue_url("q")).json()["leased"] == 1
    assert claim(api, "q").json()["item"]["value"] == "a1"  # the claim takes it back first
    from drf_spectacular.generators import SchemaGenerator

    schemas = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    for schema, field in (("Queue", "leased"), ("KeyLimitState", "leased"), ("KeyLimitState", "at_limit")):
        assert "until the next pop or claim" in schemas[schema]["properties"][field]["description"]
