"""The REST API's HTTP contract (issue 4), through DRF's test client.

Every route is exercised for its success and each listed error, on a fresh store per test
(`fdbqueue_db`), with the queues created through the API itself so the tests read as a client
would use it.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from rest_framework.test import APIClient

from .api_helpers import API, assert_empty_204, assert_error, make_queue, push, queue_url
from .api_helpers import anonymous, api, user  # noqa: F401 - fixtures, found by name (api needs user)

pytestmark = pytest.mark.django_db

# ----------------------------------------------------------------------------- fixtures and helpers


def assert_item(item: dict, value, priority: int = 0) -> None:
    # Pushes also say whether the push was a duplicate (issue 10).
    assert set(item) - {"duplicate"} == {"id", "priority", "value", "enqueued_at", "attempts"}
    assert item["attempts"] == 0
    assert item["value"] == value
    assert item["priority"] == priority
    assert isinstance(item["id"], str) and item["id"]
    enqueued_at = datetime.datetime.fromisoformat(item["enqueued_at"].replace("Z", "+00:00"))
    assert enqueued_at.utcoffset() == datetime.timedelta(0)


QUEUE_FIELDS = {
    "name",
    "kind",
    "size",
    "pushed",
    "popped",
    "min_priority",
    "max_priority",
    "oldest_age_seconds",
    "url",
    "leased",
    "delayed",
    "dead",
    "max_attempts",
    "oldest_enqueued_at",
    "created_at",  # issue 17: the fields (and names) Python and the CLI show
    "key_concurrency",
    "key_rate",  # issue 20: per-key limits
    "tenants",  # issue 20: queues split by tenant
}


# ----------------------------------------------------------------------------- GET queues/


def test_list_queues_ordered_by_name(api):
    for name in ["pears", "apples", "a.b-c_9", "Zebra"]:
        make_queue(api, name)
    response = api.get(API)
    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    assert [q["name"] for q in body["results"]] == ["Zebra", "a.b-c_9", "apples", "pears"]
    assert all(set(q) == QUEUE_FIELDS for q in body["results"])


def test_list_queues_empty(api):
    response = api.get(API)
    assert response.status_code == 200
    assert response.json() == {"next": None, "results": []}


def test_list_queues_pages_with_an_absolute_next_link(api):
    names = [f"q{i:02d}" for i in range(5)]
    for name in names:
        make_queue(api, name)
    seen: list[str] = []
    url = f"{API}?limit=2"
    pages = 0
    while url:
        response = api.get(url)
        assert response.status_code == 200
        body = response.json()
        assert len(body["results"]) <= 2
        seen += [q["name"] for q in body["results"]]
        url = body["next"]
        pages += 1
        assert pages <= 5, "pagination does not end"
        if url:
            parts = urlsplit(url)
            assert parts.scheme == "http" and parts.netloc == "testserver"
            assert parse_qs(parts.query)["limit"] == ["2"]
    assert seen == names


def test_list_queues_prefix(api):
    for name in ["jobs.a", "jobs.b", "mail"]:
        make_queue(api, name)
    response = api.get(API, {"prefix": "jobs."})
    assert [q["name"] for q in response.json()["results"]] == ["jobs.a", "jobs.b"]


@pytest.mark.parametrize("query", ["limit=501", "limit=0", "limit=x", "cursor=not-a-cursor%21"])
def test_list_queues_bad_query_is_400(api, query):
    make_queue(api, "one")
    assert_error(api.get(f"{API}?{query}"), 400)


def test_list_queues_limit_500_is_allowed(api):
    assert api.get(f"{API}?limit=500").status_code == 200


# ----------------------------------------------------------------------------- POST queues/


def test_create_queue(api):
    response = api.post(API, {"name": "jobs", "kind": "priority"}, format="json")
    assert response.status_code == 201
    body = response.json()
    created = datetime.datetime.fromisoformat(body.pop("created_at").replace("Z", "+00:00"))
    assert abs((created - datetime.datetime.now(datetime.timezone.utc)).total_seconds()) < 60
    assert body == {
        "name": "jobs",
        "kind": "priority",
        "size": 0,
        "pushed": 0,
        "popped": 0,
        "min_priority": None,
        "max_priority": None,
        "oldest_age_seconds": None,
        "oldest_enqueued_at": None,
        "leased": 0,
        "delayed": 0,
        "dead": 0,
        "max_attempts": None,
        "key_concurrency": None,
        "key_rate": None,
        "tenants": None,
        "url": "http://testserver/api/queues/jobs/",
    }


def test_create_queue_kind_defaults_to_fifo(api):
    assert make_queue(api, "plain")["kind"] == "fifo"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"kind": "fifo"},
        {"name": "ok", "kind": "stack"},
    ],
)
def test_create_queue_invalid_is_400(api, body):
    body = assert_error(api.post(API, body, format="json"), 400, "invalid")
    assert body["errors"]


@pytest.mark.parametrize(
    "name", ["", "has space", "slash/no", "x" * 201, " jobs\n", "jobs ", "\tjobs", "jobs\n", 12, None]
)
def test_create_queue_with_a_name_the_service_refuses_is_400_invalid_queue_name(api, name):
    """Taken as sent, never trimmed: what the service refuses, the API refuses the same way."""
    body = assert_error(api.post(API, {"name": name, "kind": "fifo"}, format="json"), 400, "invalid_queue_name")
    assert body["errors"]["name"]
    assert api.get(API).json()["results"] == []


@pytest.mark.parametrize("prefix", ["  ", " jobs", "jobs ", "a/b"])
def test_list_queues_with_a_prefix_the_service_refuses_is_400(api, prefix):
    make_queue(api, "jobs")
    assert_error(api.get(API, {"prefix": prefix}), 400, "invalid_queue_name")


def test_cursors_are_not_trimmed(api):
    for name in ["a", "b", "c"]:
        make_queue(api, name)
    cursor = parse_qs(urlsplit(api.get(API, {"limit": 1}).json()["next"]).query)["cursor"][0]
    assert api.get(API, {"cursor": cursor, "limit": 1}).status_code == 200
    assert_error(api.get(API, {"cursor": f" {cursor}\n", "limit": 1}), 400, "invalid_cursor")
    push(api, "a", {"value": "x"})
    push(api, "a", {"value": "y"})
    page = api.get(queue_url("a", "items"), {"limit": 1}).json()
    item_cursor = parse_qs(urlsplit(page["next"]).query)["cursor"][0]
    assert_error(api.get(queue_url("a", "items"), {"cursor": f"{item_cursor} "}), 400, "invalid_cursor")


def test_create_queue_with_200_character_name(api):
    name = "n" * 200
    assert make_queue(api, name)["name"] == name
    assert api.get(queue_url(name)).status_code == 200


def test_create_existing_queue_is_409(api):
    make_queue(api, "jobs")
    body = assert_error(api.post(API, {"name": "jobs", "kind": "priority"}, format="json"), 409)
    assert body["code"] == "queue_already_exists"
    # Not overwritten.
    assert api.get(queue_url("jobs")).json()["kind"] == "fifo"


def test_malformed_json_is_400_json(api):
    response = api.post(API, data="{not json", content_type="application/json")
    assert_error(response, 400, "parse_error")


def test_non_object_json_is_400(api):
    assert_error(api.post(API, data="[1, 2]", content_type="application/json"), 400, "invalid")


def test_unsupported_media_type_is_415_json(api):
    assert_error(api.post(API, data="name=x", content_type="text/plain"), 415)


# ----------------------------------------------------------------------------- GET/DELETE queues/{name}/


def test_get_queue_with_statistics(api):
    make_queue(api, "pq", "priority")
    for priority in (5, -3, 9):
        assert push(api, "pq", {"value": priority, "priority": priority}).status_code == 201
    assert api.post(queue_url("pq", "pop")).status_code == 200
    response = api.get(queue_url("pq"))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == QUEUE_FIELDS
    assert (body["size"], body["pushed"], body["popped"]) == (2, 3, 1)
    assert (body["min_priority"], body["max_priority"]) == (5, 9)
    assert isinstance(body["oldest_age_seconds"], float) and body["oldest_age_seconds"] >= 0
    assert body["url"] == "http://testserver/api/queues/pq/"
    created, oldest = (
        datetime.datetime.fromisoformat(body[field].replace("Z", "+00:00"))
        for field in ("created_at", "oldest_enqueued_at")
    )
    assert created <= oldest and oldest.utcoffset() == datetime.timedelta(0)


def test_get_queue_name_with_dots_is_not_a_format_suffix(api):
    make_queue(api, "report.json")
    response = api.get(queue_url("report.json"))
    assert response.status_code == 200
    assert response.json()["name"] == "report.json"


def test_get_missing_queue_is_404(api):
    assert_error(api.get(queue_url("nope")), 404, "queue_not_found")


@pytest.mark.parametrize("segment", ["bad%20name", "%C3%A9", "x" * 201, "a:b"])
def test_invalid_name_in_url_is_a_json_400(api, segment):
    """A name the service refuses is a JSON error naming the rule, not Django's HTML 404."""
    body = assert_error(api.get(f"{API}{segment}/"), 400, "invalid_queue_name")
    assert "1 to 200" in body["detail"]


def test_queues_named_dot_and_dot_dot_are_reachable_as_tilde_segments(api):
    """Clients collapse "/./" and "/../": those two names travel as "~." and "~.."."""
    for name in (".", ".."):
        created = make_queue(api, name)
        assert created["url"].endswith(f"/api/queues/~{name}/")
        assert api.get(created["url"]).json()["name"] == name
        assert push(api, f"~{name}", {"value": 1}).status_code == 201
        assert api.get(queue_url(f"~{name}")).json()["size"] == 1


def test_unknown_fields_are_refused_not_dropped(api):
    """A typo such as "prio" must not silently push at priority 0."""
    make_queue(api, "typo", "priority")
    body = assert_error(push(api, "typo", {"value": 1, "prio": 5}), 400, "invalid")
    assert body["errors"] == {"prio": ["Unknown field."]}
    batch = push(api, "typo", {"items": [{"value": 1, "priorty": 2}]})
    assert_error(batch, 400, "invalid")
    assert_error(api.post(API, {"name": "n", "knd": "fifo"}, format="json"), 400, "invalid")
    assert api.get(queue_url("typo")).json()["size"] == 0


def test_hostile_bodies_are_client_errors_and_store_nothing(api):
    """A lone surrogate, or JSON nested past the parser's depth: 400 with a JSON body, nothing stored."""
    make_queue(api, "hostile")
    surrogate = api.post(queue_url("hostile", "push"), data='{"value": "\\ud800"}', content_type="application/json")
    assert_error(surrogate, 400, "invalid_value")
    deep = "[" * 100_000 + "]" * 100_000
    nested = api.post(queue_url("hostile", "push"), data='{"value": ' + deep + "}", content_type="application/json")
    assert_error(nested, 400, "parse_error")
    assert api.get(queue_url("hostile")).json()["size"] == 0


def test_crafted_cursor_tokens_are_400_not_500(api):
    """A token that unpacks into deeply nested tuples is just a bad cursor."""
    make_queue(api, "c")
    bomb = base64.urlsafe_b64encode(b"\x05" * 1400).rstrip(b"=").decode()
    assert_error(api.get(queue_url("c", "items"), {"cursor": bomb}), 400, "invalid_cursor")
    assert_error(api.get(API, {"cursor": bomb}), 400, "invalid_cursor")


def test_foundationdb_size_limit_errors_are_413_not_503(api, monkeypatch):
    """2101/2102/2103 cannot be cured by retrying: 413, and no Retry-After."""
    from django_fdbqueue import service
    from django_fdbqueue.fdbapi import make_error

    make_queue(api, "big")

    def too_large(*args, **kwargs):
        raise make_error(2101)

    monkeypatch.setattr(service, "push", too_large)
    response = push(api, "big", {"value": 1})
    body = assert_error(response, 413, "request_too_large")
    assert body["fdb_error"] == 2101
    assert "Retry-After" not in response


def test_delete_queue(api):
    make_queue(api, "gone")
    push(api, "gone", {"value": 1})
    assert_empty_204(api.delete(queue_url("gone")))
    assert_error(api.get(queue_url("gone")), 404)
    # Its items went with it: a new queue of the same name starts empty.
    make_queue(api, "gone")
    assert api.get(queue_url("gone")).json()["size"] == 0


def test_delete_missing_queue_is_404(api):
    assert_error(api.delete(queue_url("nope")), 404, "queue_not_found")


# ----------------------------------------------------------------------------- push


def test_push_one_to_fifo_defaults_priority_0(api):
    make_queue(api, "fifo")
    response = push(api, "fifo", {"value": {"task": "send", "to": ["a", "b"]}})
    assert response.status_code == 201
    assert_item(response.json(), {"task": "send", "to": ["a", "b"]}, 0)


def test_push_explicit_zero_priority_to_fifo(api):
    make_queue(api, "fifo")
    assert push(api, "fifo", {"value": "x", "priority": 0}).status_code == 201


@pytest.mark.parametrize("value", [None, 0, "", [], {}, 3.5, True, "ünïcode"])
def test_push_any_json_value(api, value):
    make_queue(api, "fifo")
    response = push(api, "fifo", {"value": value})
    assert response.status_code == 201, response.content
    assert response.json()["value"] == value
    assert api.post(queue_url("fifo", "pop")).json()["value"] == value


def test_push_with_priority(api):
    make_queue(api, "pq", "priority")
    for priority in (2**63 - 1, -(2**63)):
        response = push(api, "pq", {"value": "edge", "priority": priority})
        assert response.status_code == 201
        assert_item(response.json(), "edge", priority)


def test_push_batch(api):
    make_queue(api, "pq", "priority")
    items = [{"value": "low", "priority": 1}, {"value": "high", "priority": 7}, {"value": "default"}]
    response = push(api, "pq", {"items": items})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"items"}
    assert [(i["value"], i["priority"]) for i in body["items"]] == [("low", 1), ("high", 7), ("default", 0)]
    for item in body["items"]:
        assert_item(item, item["value"], item["priority"])
    assert len({i["id"] for i in body["items"]}) == 3
    assert api.get(queue_url("pq")).json()["size"] == 3


def test_push_batch_to_fifo_keeps_order(api):
    make_queue(api, "fifo")
    push(api, "fifo", {"items": [{"value": n} for n in range(10)]})
    popped = [api.post(queue_url("fifo", "pop")).json()["value"] for _ in range(10)]
    assert popped == list(range(10))


def test_push_nonzero_priority_to_fifo_is_400(api):
    make_queue(api, "fifo")
    assert_error(push(api, "fifo", {"value": 1, "priority": 3}), 400)
    assert_error(push(api, "fifo", {"items": [{"value": 1}, {"value": 2, "priority": -1}]}), 400)
    assert api.get(queue_url("fifo")).json()["size"] == 0


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"priority": 1},
        {"value": 1, "priority": "1"},
        {"value": 1, "priority": 1.5},
        {"value": 1, "priority": True},
        {"value": 1, "priority": None},
        {"value": 1, "priority": 2**63},
        {"value": 1, "priority": -(2**63) - 1},
        {"items": []},
        {"items": "nope"},
        {"items": [{"priority": 1}]},
        {"items": [{"value": 1}], "value": 2},
        {"items": [{"value": n} for n in range(501)]},
    ],
)
def test_push_invalid_body_is_400(api, body):
    make_queue(api, "pq", "priority")
    body = assert_error(push(api, "pq", body), 400, "invalid")
    assert body["errors"]
    assert api.get(queue_url("pq")).json()["size"] == 0


def test_push_to_missing_queue_is_404(api):
    assert_error(push(api, "nope", {"value": 1}), 404, "queue_not_found")
    assert_error(push(api, "nope", {"items": [{"value": 1}]}), 404, "queue_not_found")


def test_push_too_large_value_is_413(api):
    make_queue(api, "fifo")
    big = "x" * 100_001
    assert_error(push(api, "fifo", {"value": big}), 413, "value_too_large")
    # In a batch, nothing is written either.
    assert_error(push(api, "fifo", {"items": [{"value": "small"}, {"value": big}]}), 413, "value_too_large")
    assert api.get(queue_url("fifo")).json()["size"] == 0


def test_push_body_over_data_upload_max_memory_size_is_413(api, settings):
    make_queue(api, "fifo")
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    assert_error(push(api, "fifo", {"value": "x" * 1_000}), 413, "request_too_large")
    assert_error(push(api, "fifo", {"items": [{"value": "x" * 100}] * 10}), 413, "request_too_large")
    assert push(api, "fifo", {"value": "x" * 900}).status_code == 201
    assert api.get(queue_url("fifo")).json()["size"] == 1


def test_push_largest_batch(api):
    make_queue(api, "fifo")
    response = push(api, "fifo", {"items": [{"value": f"{n:04d}" + "x" * 4_000} for n in range(500)]})
    assert response.status_code == 201
    assert len(response.json()["items"]) == 500
    info = api.get(queue_url("fifo")).json()
    assert (info["size"], info["pushed"]) == (500, 500)


def test_push_value_just_under_the_limit(api):
    make_queue(api, "fifo")
    value = "x" * 90_000
    assert push(api, "fifo", {"value": value}).status_code == 201


# ----------------------------------------------------------------------------- pop


def test_pop_fifo_in_order(api):
    make_queue(api, "fifo")
    for n in ("a", "b", "c"):
        push(api, "fifo", {"value": n})
    response = api.post(queue_url("fifo", "pop"))
    assert response.status_code == 200
    assert_item(response.json(), "a")
    assert api.post(queue_url("fifo", "pop") + "?end=min").json()["value"] == "b"
    assert api.get(queue_url("fifo")).json()["size"] == 1


def test_pop_both_ends_of_a_priority_queue(api):
    make_queue(api, "pq", "priority")
    push(
        api,
        "pq",
        {
            "items": [
                {"value": "mid", "priority": 5},
                {"value": "lo", "priority": 1},
                {"value": "hi-1", "priority": 9},
                {"value": "hi-2", "priority": 9},
            ]
        },
    )
    assert api.post(queue_url("pq", "pop") + "?end=max").json()["value"] == "hi-1"
    assert api.post(queue_url("pq", "pop")).json()["value"] == "lo"
    assert api.post(queue_url("pq", "pop") + "?end=max").json()["value"] == "hi-2"
    assert api.post(queue_url("pq", "pop") + "?end=min").json()["value"] == "mid"


def test_pop_empty_is_204(api):
    make_queue(api, "fifo")
    assert_empty_204(api.post(queue_url("fifo", "pop")))
    make_queue(api, "pq", "priority")
    assert_empty_204(api.post(queue_url("pq", "pop") + "?end=max"))


def test_pop_bad_end_is_400(api):
    make_queue(api, "pq", "priority")
    push(api, "pq", {"value": 1})
    assert_error(api.post(queue_url("pq", "pop") + "?end=middle"), 400, "invalid")
    assert api.get(queue_url("pq")).json()["size"] == 1


def test_pop_max_of_fifo_is_400(api):
    make_queue(api, "fifo")
    push(api, "fifo", {"value": 1})
    assert_error(api.post(queue_url("fifo", "pop") + "?end=max"), 400, "wrong_queue_kind")
    assert api.get(queue_url("fifo")).json()["size"] == 1


def test_pop_missing_queue_is_404(api):
    assert_error(api.post(queue_url("nope", "pop")), 404, "queue_not_found")


def test_pop_is_post_only(api):
    make_queue(api, "fifo")
    assert_error(api.get(queue_url("fifo", "pop")), 405)


# ----------------------------------------------------------------------------- peek


def test_peek_returns_without_removing(api):
    make_queue(api, "pq", "priority")
    push(api, "pq", {"items": [{"value": "lo", "priority": -1}, {"value": "hi", "priority": 1}]})
    for _ in range(2):
        response = api.get(queue_url("pq", "peek"))
        assert response.status_code == 200
        assert_item(response.json(), "lo", -1)
    assert api.get(queue_url("pq", "peek") + "?end=max").json()["value"] == "hi"
    assert api.get(queue_url("pq")).json()["size"] == 2


def test_peek_empty_is_204(api):
    make_queue(api, "fifo")
    assert_empty_204(api.get(queue_url("fifo", "peek")))


def test_peek_bad_end_is_400(api):
    make_queue(api, "fifo")
    assert_error(api.get(queue_url("fifo", "peek") + "?end=both"), 400, "invalid")
    assert_error(api.get(queue_url("fifo", "peek") + "?end=max"), 400, "wrong_queue_kind")


def test_peek_missing_queue_is_404(api):
    assert_error(api.get(queue_url("nope", "peek")), 404, "queue_not_found")


# ----------------------------------------------------------------------------- items


def test_items_in_queue_order_nothing_removed(api):
    make_queue(api, "pq", "priority")
    pairs = [("c", 3), ("a", 1), ("b", 2), ("a2", 1)]
    push(api, "pq", {"items": [{"value": v, "priority": p} for v, p in pairs]})
    response = api.get(queue_url("pq", "items"))
    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    assert [i["value"] for i in body["results"]] == ["a", "a2", "b", "c"]
    for item in body["results"]:
        assert_item(item, item["value"], item["priority"])
    reverse = api.get(queue_url("pq", "items") + "?end=max").json()["results"]
    assert [i["value"] for i in reverse] == ["c", "b", "a", "a2"]
    assert api.get(queue_url("pq")).json()["size"] == 4


def test_items_pages_with_cursor(api):
    make_queue(api, "fifo")
    push(api, "fifo", {"items": [{"value": n} for n in range(7)]})
    seen: list[int] = []
    url = queue_url("fifo", "items") + "?limit=3"
    for _ in range(5):
        body = api.get(url).json()
        seen += [i["value"] for i in body["results"]]
        url = body["next"]
        if url is None:
            break
        assert url.startswith("http://testserver/api/queues/fifo/items/?")
    assert url is None
    assert seen == list(range(7))


def test_items_of_empty_queue(api):
    make_queue(api, "fifo")
    assert api.get(queue_url("fifo", "items")).json() == {"next": None, "results": []}


@pytest.mark.parametrize("query", ["limit=501", "limit=0", "limit=-1", "end=sideways", "cursor=garbage%21%21"])
def test_items_bad_query_is_400(api, query):
    make_queue(api, "pq", "priority")
    push(api, "pq", {"value": 1})
    assert_error(api.get(queue_url("pq", "items") + "?" + query), 400)


def test_items_limit_500_is_allowed(api):
    make_queue(api, "fifo")
    assert api.get(queue_url("fifo", "items") + "?limit=500").status_code == 200


def test_items_max_end_of_fifo_is_400(api):
    make_queue(api, "fifo")
    assert_error(api.get(queue_url("fifo", "items") + "?end=max"), 400, "wrong_queue_kind")


def test_items_missing_queue_is_404(api):
    assert_error(api.get(queue_url("nope", "items")), 404, "queue_not_found")


# ----------------------------------------------------------------------------- clear


def test_clear(api):
    make_queue(api, "fifo")
    push(api, "fifo", {"items": [{"value": n} for n in range(3)]})
    assert_empty_204(api.post(queue_url("fifo", "clear")))
    body = api.get(queue_url("fifo")).json()
    assert body["size"] == 0 and body["oldest_age_seconds"] is None
    assert_empty_204(api.post(queue_url("fifo", "pop")))


def test_clear_missing_queue_is_404(api):
    assert_error(api.post(queue_url("nope", "clear")), 404, "queue_not_found")


# ----------------------------------------------------------------------------- auth and permissions

ROUTES = [
    ("get", API),
    ("post", API),
    ("get", queue_url("q")),
    ("delete", queue_url("q")),
    ("post", queue_url("q", "push")),
    ("post", queue_url("q", "pop")),
    ("get", queue_url("q", "peek")),
    ("get", queue_url("q", "items")),
    ("post", queue_url("q", "clear")),
]


@pytest.mark.parametrize(("method", "url"), ROUTES)
def test_anonymous_is_refused(api, anonymous, method, url):
    make_queue(api, "q")
    push(api, "q", {"value": "secret"})
    response = getattr(anonymous, method)(url, {"name": "x", "value": 1}, format="json")
    assert_error(response, response.status_code)
    assert response.status_code in (401, 403)
    # Nothing happened.
    info = api.get(queue_url("q")).json()
    assert info["size"] == 1
    assert [q["name"] for q in api.get(API).json()["results"]] == ["q"]


def test_basic_auth_works_and_bad_password_is_refused(fdbqueue_db, user):
    client = APIClient()
    good = base64.b64encode(b"alice:wonderland").decode()
    client.credentials(HTTP_AUTHORIZATION=f"Basic {good}")
    assert client.get(API).status_code == 200
    bad = base64.b64encode(b"alice:wrong").decode()
    client.credentials(HTTP_AUTHORIZATION=f"Basic {bad}")
    response = client.get(API)
    # 401 when the project's first authentication class can challenge (basic), 403 after session.
    assert_error(response, response.status_code, "authentication_failed")
    assert response.status_code in (401, 403)


def test_permission_classes_setting_allow_any(settings, anonymous):
    """AllowAny opens the API to anonymous clients only with ACCESS "authenticated": grants name users."""
    settings.FDBQUEUE = {**settings.FDBQUEUE, "PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"]}
    assert_error(anonymous.post(API, {"name": "open"}, format="json"), 403, "not_authenticated")
    settings.FDBQUEUE = {**settings.FDBQUEUE, "ACCESS": "authenticated"}
    assert anonymous.post(API, {"name": "open"}, format="json").status_code == 201
    assert push(anonymous, "open", {"value": 1}).status_code == 201
    assert anonymous.post(queue_url("open", "pop")).json()["value"] == 1


def test_permission_classes_setting_admin_only(settings, api):
    settings.FDBQUEUE = {**settings.FDBQUEUE, "PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"]}
    # alice is authenticated but not staff.
    assert_error(api.get(API), 403, "permission_denied")


# ----------------------------------------------------------------------------- the database failing


@pytest.fixture
def failing_commits(settings, engine_name, api):
    """Make every commit fail as a conflict, with one retry, so the retry loop gives up (embedded only)."""
    from django_fdbqueue import connection

    make_queue(api, "q", "priority")
    push(api, "q", {"value": "kept"})
    settings.FDBQUEUE = {**settings.FDBQUEUE, "RETRY_LIMIT": 1, "FAULTS": {"not_committed": 1.0}}
    connection.reset_database()
    return api


def assert_unavailable(response) -> dict:
    body = assert_error(response, 503, "database_unavailable")
    assert int(response["Retry-After"]) >= 1
    assert "Traceback" not in response.content.decode()
    return body


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("post", API, {"name": "new"}),
        ("post", queue_url("q", "push"), {"value": 1}),
        ("post", queue_url("q", "push"), {"items": [{"value": 1}, {"value": 2}]}),
        ("post", queue_url("q", "pop"), None),
        ("post", queue_url("q", "clear"), None),
        ("delete", queue_url("q"), None),
    ],
)
def test_exhausted_retries_are_503_with_retry_after(failing_commits, method, url, body):
    response = getattr(failing_commits, method)(url, body, format="json")
    body = assert_unavailable(response)
    assert body["fdb_error"] == 1020


def test_timeout_is_503(api, monkeypatch):
    from django_fdbqueue import service
    from django_fdbqueue.fdbapi import ErrorCode, make_error

    make_queue(api, "q")

    def timed_out(*args, **kwargs):
        raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)

    monkeypatch.setattr(service, "peek", timed_out)
    assert assert_unavailable(api.get(queue_url("q", "peek")))["fdb_error"] == 1031


def test_database_that_cannot_be_opened_is_503(api, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from django_fdbqueue import connection

    def refuse(settings):
        raise ImproperlyConfigured("install the FoundationDB client packages")

    connection.reset_database()
    monkeypatch.setattr(connection, "open_database", refuse)
    body = assert_unavailable(api.get(API))
    assert body["fdb_error"] is None
    assert "FoundationDB client" not in body["detail"]  # configuration details stay in the log


def test_unexpected_error_is_json_500_without_traceback(api, monkeypatch):
    from django_fdbqueue import service

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(service, "get_queue", broken)
    response = api.get(queue_url("q"))
    assert_error(response, 500, "server_error")
    assert "boom" not in response.content.decode()


# ----------------------------------------------------------------------------- mounting


def test_queue_url_follows_the_mount_namespace(api):
    from django.urls import reverse

    assert reverse("fdbqueue-api:queue-detail", kwargs={"name": "x"}) == queue_url("x")
    assert make_queue(api, "x")["url"] == "http://testserver" + queue_url("x")


def test_browsable_root_lists_queues(api):
    response = api.get("/api/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    assert json.loads(response.content)["queues"] == "http://testserver/api/queues/"


# ----------------------------------------------------------------------------- values and parsing


def test_bytes_values_pushed_from_python_are_shown_as_base64(api, fdbqueue_db):
    from django_fdbqueue import service

    make_queue(api, "raw")
    service.push(fdbqueue_db, "raw", b"\x00\xffbinary")
    response = api.get(queue_url("raw", "peek"))
    assert response.status_code == 200
    assert response.json()["value"] == {"$base64": base64.b64encode(b"\x00\xffbinary").decode()}


def test_parser_bounds_the_body_even_when_reading_the_raw_stream(settings):
    import io

    from django_fdbqueue.api.exceptions import RequestTooLarge
    from django_fdbqueue.api.parsers import BoundedJSONParser

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10
    parser = BoundedJSONParser()
    assert parser.parse(io.BytesIO(b'{"a": 12}'), "application/json", {}) == {"a": 12}
    with pytest.raises(RequestTooLarge):
        parser.parse(io.BytesIO(b'{"a": 123456}'), "application/json", {})
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None
    assert parser.parse(io.BytesIO(b'{"a": 123456}'), "application/json", {}) == {"a": 123456}


def test_the_browsable_root_speaks_to_the_apis_users(api):
    """The root page's title and description are written for the API's users, not the class's
    name ("Queue Api Root") and internal docstring."""
    page = api.get("/api/", HTTP_ACCEPT="text/html").content.decode()
    assert re.search(r"<h1>\s*FDB queues API\s*</h1>", page), page[:2000]
    assert "<title>FDB queues API" in page
    assert "priority queues (push, pop, claim and ack" in page
    for internal in ("Queue Api Root", "DEFAULT_PERMISSION_CLASSES", "PERMISSION_CLASSES"):
        assert internal not in page
