"""Schemathesis against the API's own OpenAPI schema (issue 12, "Hostile input").

Every operation the schema documents is called with requests generated from that schema, both
valid ones and deliberately invalid ones (schemathesis's "all" generation mode, in its coverage
and fuzzing phases), in-process through Django's WSGI handler, authenticated with HTTP
basic auth as a test user. Each response must:

- not be a 5xx (``not_a_server_error``);
- have a status code the operation documents, a body that matches the documented schema, and the
  documented content type and headers (schemathesis's conformance checks);
- refuse what the schema says is invalid (``negative_data_rejection``), and refuse what the schema
  says is valid only for a reason a schema cannot state: an opaque token (cursor, receipt, item id)
  that was not handed out, a rule across fields, or the queue's kind or state
  (``refused_only_for_what_the_schema_cannot_say``, instead of the stricter built-in
  ``positive_data_acceptance``);
- if it is a 4xx, leave the store exactly as it was, byte for byte.

Each operation runs on a fresh embedded store seeded with a FIFO queue, a priority queue, the
queue named "." (written "~." in paths), and a queue with dead letters; generated queue names,
item ids and receipts are swapped, some of the time, for real ones, so requests reach real queues
and leases as well as missing ones. Long polls answer at once (the service's wait is patched to
time out), so a generated ``wait`` of 20 s costs nothing.

Size: FDBQUEUE_FUZZ_EXAMPLES generated examples per operation (default 25; the coverage phase
adds its own boundary cases, about 35 per operation), so the file runs in about 15 s on 2 cores.
Runs are deterministic (derandomized, no example database); FDBQUEUE_FUZZ_SEED picks another
seed, and FDBQUEUE_FUZZ_LOG names a file to append one line per request to (operation, mode,
phase, status). The long run (about 80 s for 300, 4 minutes for 1,000, on 2 cores):

    FDBQUEUE_FUZZ_EXAMPLES=300 .venv/bin/python -m pytest tests/test_api_fuzz.py

The regression tests at the end pin what the fuzzing found, one by one.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import random
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from .api_helpers import API, assert_error, grant_everything, make_queue, push, queue_url
from .api_helpers import api, user  # noqa: F401 - fixtures of the regression tests (api needs user)

pytestmark = pytest.mark.django_db

FUZZ_EXAMPLES = int(os.environ.get("FDBQUEUE_FUZZ_EXAMPLES", "25"))
FUZZ_LOG = os.environ.get("FDBQUEUE_FUZZ_LOG")
FUZZ_SEED = int(os.environ.get("FDBQUEUE_FUZZ_SEED", "12"))
USERNAME, PASSWORD = "fuzzer", "fuzz-password"
ROOT = ("fdbqueue-fuzz",)

# What the path parameters and receipts look like to the schema (schemas.py, serializers.py): a
# generated value that fits is swapped only for another that fits, so a case generated as valid
# stays valid and one generated as invalid stays invalid.
SEGMENT = re.compile(r"(?:~\.\.?|[A-Za-z0-9._-]{1,200})")
ITEM_ID = re.compile(r"[A-Za-z0-9_-]+")

# 400s that a schema-valid request may still get: tokens the schema can only describe as strings,
# rules about the queue's kind or contents (wrong_queue_kind, invalid_argument: e.g. a not_before
# more than 366 days ahead, or an item id that is not one of ours), and values JSON Schema cannot
# tell from storable ones (invalid_value: nesting deeper than 256 levels).
OPAQUE_OR_STATEFUL_CODES = frozenset(
    {
        "invalid_cursor",
        "invalid_receipt",
        "invalid_argument",
        "wrong_queue_kind",
        "invalid_value",
        # A schedule's cron expression, time zone and target: rules of croniter, the IANA database
        # and the target's kind that a JSON schema cannot state.
        "invalid_schedule",
    }
)


# ----------------------------------------------------------------------------- the store and its seed


@dataclass
class World:
    """The store under test, its seeded queues, and ways to reach real items and leases."""

    db: Any
    segments: tuple[str, ...] = ("fuzz-fifo", "fuzz-prio", "~.", "fuzz-dead")
    receipts_made: int = field(default=0)

    def seed(self) -> None:
        """Queues in every state the API can show: ready, leased, delayed, dead, bytes values."""
        from django_fdbqueue import service

        db = self.db
        service.create_queue(db, "fuzz-fifo")
        service.push_many(db, "fuzz-fifo", [{"n": 1}, "two", None, [3, {"deep": True}]])
        service.push(db, "fuzz-fifo", b"\x00\xffraw bytes")
        service.push(db, "fuzz-fifo", "later", delay=3600, dedup_key="later")
        service.claim(db, "fuzz-fifo", lease=3600)
        service.create_queue(db, "fuzz-prio", kind="priority")
        service.push_many(db, "fuzz-prio", [("low", -(2**63)), ("mid", 0), ("high", 2**63 - 1), ("seven", 7)])
        service.claim(db, "fuzz-prio", lease=3600, end="max")
        service.create_queue(db, ".", kind="priority")
        service.push(db, ".", "in the dot queue", priority=-3)
        service.create_queue(db, "fuzz-dead", max_attempts=1)
        for _ in range(2):
            self.kill("fuzz-dead")
        service.push(db, "fuzz-dead", "alive")

    def ensure(self, segment: str) -> None:
        """Put a seeded queue back if an earlier example deleted it."""
        from django_fdbqueue import service
        from django_fdbqueue.paths import segment_to_name

        name = segment_to_name(segment)
        if not service.queue_exists(self.db, name):
            kind = "fifo" if segment in ("fuzz-fifo", "fuzz-dead") else "priority"
            service.create_queue(self.db, name, kind=kind, max_attempts=1 if segment == "fuzz-dead" else None)
            service.push(self.db, name, "refilled")

    def kill(self, name: str) -> None:
        """Make a dead letter on a queue with max_attempts=1: push, claim, release."""
        from django_fdbqueue import service

        service.push(self.db, name, "dead again")
        lease = service.claim(self.db, name)
        if lease is not None:
            service.release(self.db, lease.receipt, delay=0)

    def item_ids(self, segment: str) -> list[str]:
        """Ids of dead letters and of queued items of a queue: dead-letter routes get both kinds."""
        from django_fdbqueue import exceptions, service
        from django_fdbqueue.paths import segment_to_name

        name = segment_to_name(segment)
        try:
            if segment == "fuzz-dead" and not service.dead_letters(self.db, name, limit=1).items:
                self.kill(name)  # earlier examples requeued or deleted them all
            dead = [letter.item.id for letter in service.dead_letters(self.db, name, limit=3).items]
            ready = [item.id for item in service.browse(self.db, name, limit=2).items]
        except exceptions.QueueError:
            return []
        return dead + ready

    def receipt(self, segment: str, kind: str) -> str | None:
        """A real receipt: of a lease on this queue ("live"), on another queue ("other"), or of a
        lease already acked ("settled"). None when the queue cannot give one."""
        from django_fdbqueue import exceptions, service
        from django_fdbqueue.paths import segment_to_name

        if kind == "other":
            segment = "fuzz-fifo" if segment == "fuzz-prio" else "fuzz-prio"
        name = segment_to_name(segment)
        try:
            self.ensure(segment)
            service.push(self.db, name, {"for": "a receipt", "n": self.receipts_made})
            lease = service.claim(self.db, name, lease=3600)
            if lease is None:
                return None
            if kind == "settled":
                service.ack(self.db, lease.receipt)
        except exceptions.QueueError:
            return None
        self.receipts_made += 1
        return lease.receipt

    def dump(self) -> list[tuple[bytes, bytes]]:
        """Every key and value in the store: a refused request must leave all of them as they were."""
        return [(kv.key, kv.value) for kv in self.db.get_range(b"", b"\xff")]


@pytest.fixture
def world(tmp_path, settings, monkeypatch) -> Iterator[World]:
    """A fresh, seeded embedded store, a user to log in as, and requests served in this thread."""
    from django.contrib.auth import get_user_model
    from django.core import signals
    from django.db import close_old_connections
    from django.test import Client

    from django_fdbqueue import connection
    from django_fdbqueue.service._internals import waiting

    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(tmp_path / "fuzz.sqlite3"), "ROOT": ROOT}
    # A long poll times out at once: the fuzzer may ask for 20 s on every request.
    monkeypatch.setattr(waiting, "until_visible", lambda *args, **kwargs: False)
    connection.reset_database()
    grant_everything(get_user_model().objects.create_user(USERNAME, password=PASSWORD))
    state = World(connection.get_database())
    state.seed()
    # Without a working login every answer would be a documented 401/403 and the run would pass
    # without testing anything: make sure basic auth gets in.
    login = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
    answer = Client().get("/api/queues/fuzz-fifo/", HTTP_AUTHORIZATION=f"Basic {login}")
    assert answer.status_code == 200, f"the fuzz user cannot log in with basic auth: {answer.content[:200]!r}"
    # Like Django's test client: the WSGI handler must not close the test's database connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield state
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
        connection.reset_database()


# ----------------------------------------------------------------------------- the schema and the checks


@functools.cache
def generated_schema() -> dict[str, Any]:
    """The schema drf-spectacular generates for the app (test_api_schema checks that /api/schema/
    serves the same)."""
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def load_schema() -> Any:
    """The app's schema for schemathesis, bound to the project's WSGI application."""
    from django.core.handlers.wsgi import WSGIHandler

    raw = copy.deepcopy(generated_schema())
    config = schemathesis.Config.from_dict(
        {
            "seed": FUZZ_SEED,
            "generation": {
                "mode": "all",
                "max-examples": FUZZ_EXAMPLES,
                "deterministic": True,
                "database": "none",
            },
            # The coverage phase adds boundary values (each bound, just past it, every enum value).
            "phases": {"coverage": {"enabled": True}},
            "auth": {"basic": {"username": USERNAME, "password": PASSWORD}},
            # Replaced by refused_only_for_what_the_schema_cannot_say, below.
            "checks": {"positive_data_acceptance": {"enabled": False}},
        }
    )
    loaded = schemathesis.openapi.from_dict(raw, config=config)
    loaded.app = WSGIHandler()
    return loaded.exclude(path="/api/schema/")


def refused_only_for_what_the_schema_cannot_say(ctx: Any, response: Any, case: Any) -> bool | None:
    """A schema-valid request may be refused with a 400 only for an opaque token, a rule across
    fields (non_field_errors), or the queue's kind or state; any other 400 means the schema
    allows what the API refuses, and one of them is wrong."""
    if case.meta is None or not case.meta.generation.mode.is_positive or response.status_code != 400:
        return None
    body = response.json()
    code = body.get("code")
    if code in OPAQUE_OR_STATEFUL_CODES:
        return None
    if code == "invalid" and set(body.get("errors", {})) <= {"non_field_errors"}:
        return None
    raise AssertionError(f"A request the schema allows was refused: {body}")


schema = load_schema()


def _chooser(case: Any) -> random.Random:
    """Choices made from the generated case itself: steering needs no draws of its own (which
    would turn off schemathesis's coverage phase) and replays exactly with the case."""
    text = f"{case.operation.label}|{case.path_parameters}|{case.query}|{case.body!r}"
    return random.Random(zlib.crc32(text.encode("utf-8", "surrogatepass")))


def _steer(case: Any, world: World) -> None:
    """Aim some generated requests at real queues, items and leases (see the module docstring)."""
    choose = _chooser(case)
    params = case.path_parameters or {}
    name = params.get("name")
    on_queues = case.operation.path.startswith("/api/queues/")  # the world holds queues only
    if on_queues and isinstance(name, str) and SEGMENT.fullmatch(name) and choose.random() < 0.7:
        # Dead-letter routes mostly go where the dead letters are.
        segments = ("fuzz-dead",) * 4 + world.segments if "item_id" in params else world.segments
        name = params["name"] = choose.choice(segments)
        world.ensure(name)
    item_id = params.get("item_id")
    if isinstance(item_id, str) and ITEM_ID.fullmatch(item_id) and isinstance(name, str):
        ids = world.item_ids(name)
        if ids and choose.random() < 0.7:
            params["item_id"] = choose.choice(ids)
    body = case.body
    if isinstance(body, dict) and name in world.segments:  # a queue missing on purpose stays missing
        receipt = body.get("receipt")
        if isinstance(receipt, str) and 1 <= len(receipt) <= 2000 and choose.random() < 0.7:
            real = world.receipt(name, choose.choice(["live", "live", "other", "settled"]))
            if real is not None:
                body["receipt"] = real


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api_conforms_to_its_schema(case: Any, world: World) -> None:
    _steer(case, world)
    before = world.dump()
    response = case.call_and_validate(additional_checks=[refused_only_for_what_the_schema_cannot_say])
    if FUZZ_LOG:
        fields = [case.operation.label, case.meta.generation.mode.value, case.meta.phase.name.value]
        with open(FUZZ_LOG, "a", encoding="utf-8") as log:
            log.write("\t".join([*fields, str(response.status_code)]) + "\n")
    if 400 <= response.status_code < 500:
        assert world.dump() == before, f"a {response.status_code} changed the store: {response.text[:500]}"


# ----------------------------------------------------------------------------- what the fuzzing found
#
# One test per problem, each naming the generated request that showed it. All were the schema's
# fault (it allowed what the API refuses, or left out an answer the API gives); the fixes are in
# django_fdbqueue/api/ (openapi.py, and the fields in serializers.py and schemas.py).


def _operations(prefix: str = "/api/queues/") -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in generated_schema()["paths"].items()
        if path.startswith(prefix)
        for method, operation in item.items()
        if method in {"get", "post", "patch", "delete"}
    ]


def _component(name: str) -> dict[str, Any]:
    return generated_schema()["components"]["schemas"][name]


def _parameter(path: str, method: str, name: str) -> dict[str, Any]:
    (found,) = [p for p in generated_schema()["paths"][path][method]["parameters"] if p["name"] == name]
    return found


def test_every_route_on_a_queue_documents_the_400_for_a_bad_name(api):
    """Found: GET and DELETE /api/queues/%C2%84/ and POST .../clear/ answered 400
    (invalid_queue_name), which those operations did not document."""
    for path, method, operation in _operations("/api/queues/{name}/"):
        assert "400" in operation["responses"], (method, path)
    make_queue(api, "q")
    assert_error(api.get(queue_url("%C2%84")), 400, "invalid_queue_name")
    assert_error(api.delete(queue_url("~x")), 400, "invalid_queue_name")
    assert_error(api.post(queue_url("~x", "clear")), 400, "invalid_queue_name")
    assert api.get(queue_url("q")).status_code == 200


def test_the_name_pattern_admits_only_segments_that_name_a_queue(api):
    """Found: the pattern ^~?[A-Za-z0-9._-]{1,200}$ allowed "~6" and "~_", which are no queue's
    path segment ("~" escapes only "." and ".."): PATCH /api/queues/~6/ was a 400."""
    pattern = re.compile(_parameter("/api/queues/{name}/", "get", "name")["schema"]["pattern"])
    for segment in ["q", "jobs.high-1_x", ".", "..", "~.", "~..", "a" * 200]:
        assert pattern.search(segment), segment
    for segment in ["~6", "~_", "~", "~...", "a" * 201, "a b", ""]:
        assert not pattern.search(segment), segment
    assert_error(api.patch(queue_url("~6"), {}, format="json"), 400, "invalid_queue_name")


def test_request_bodies_say_that_unknown_fields_are_refused(api):
    """Found: POST /api/queues/ with fields besides name, kind and max_attempts was schema-valid
    and a 400: every body that refuses unknown fields now has additionalProperties: false."""
    strict = ["QueueCreate", "PatchedQueueUpdate", "PushItem", "PushBatch", "PushBatchEntry", "Claim", "Receipt"]
    for name in [*strict, "Release", "Extend"]:
        assert _component(name)["additionalProperties"] is False, name
    body = assert_error(api.post(API, {"name": "n", "kind": "fifo", "colour": "red"}, format="json"), 400, "invalid")
    assert body["errors"] == {"colour": ["Unknown field."]}


def test_a_batch_documents_its_bounds(api):
    """Found: {"items": [], ...} was schema-valid and a 400 ("This list may not be empty")."""
    items = _component("PushBatch")["properties"]["items"]
    assert (items["minItems"], items["maxItems"]) == (1, 500)
    make_queue(api, "q")
    assert_error(push(api, "q", {"items": []}), 400, "invalid")


def test_lease_and_extend_seconds_exclude_zero(api):
    """Found: {"lease": 0} was schema-valid (minimum: 0) and a 400 ("Must be greater than 0").
    A wait or a delay of 0 stays valid."""
    for name, key in [("Claim", "lease"), ("Extend", "lease"), ("ExtendSeconds", "seconds")]:
        prop = _component(name)["properties"][key]
        assert (prop["minimum"], prop["exclusiveMinimum"]) == (0, True), name
    for name, key in [("Claim", "wait"), ("Release", "delay"), ("PushItem", "delay")]:
        prop = _component(name)["properties"][key]
        assert prop["minimum"] == 0 and "exclusiveMinimum" not in prop, name
    make_queue(api, "q")
    assert_error(api.post(queue_url("q", "claim"), {"lease": 0}, format="json"), 400, "invalid")
    assert api.post(queue_url("q", "claim"), {"wait": 0}, format="json").status_code == 204


def test_a_receipt_is_at_least_one_character(api):
    """Found: {"receipt": ""} was schema-valid and a 400 (invalid_receipt)."""
    for name in ["Receipt", "Release", "Extend", "ExtendSeconds"]:
        assert _component(name)["properties"]["receipt"]["minLength"] == 1, name


def test_query_parameters_may_be_sent_empty(api):
    """Found: ?cursor= broke the schema's minLength: 1 and was answered 200, since an empty query
    parameter means its default (as DRF reads query strings): allowEmptyValue on every one."""
    for path, method, operation in _operations():
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "query":
                assert parameter["allowEmptyValue"] is True, (method, path, parameter["name"])
    make_queue(api, "q")
    assert push(api, "q", {"value": "first"}).status_code == 201
    page = api.get(queue_url("q", "items") + "?cursor=&limit=&end=")
    assert page.status_code == 200 and [row["value"] for row in page.json()["results"]] == ["first"]


def test_a_push_needs_a_body(api):
    """Found: POST .../push/ with no body was schema-valid (the body was optional) and a 400
    ("value: This field is required"). Bodies with a required field are required."""
    operations = {(path, method): op for path, method, op in _operations()}
    for path in ["push", "ack", "release", "extend"]:
        assert operations[(f"/api/queues/{{name}}/{path}/", "post")]["requestBody"]["required"] is True, path
    assert operations[("/api/queues/", "post")]["requestBody"]["required"] is True
    assert "required" not in operations[("/api/queues/{name}/claim/", "post")]["requestBody"]
    make_queue(api, "q")
    assert_error(api.post(queue_url("q", "push")), 400, "invalid")


def test_prefix_and_cursor_say_what_they_take(api):
    """Found: ?prefix=Ûí½... was schema-valid (any string) and a 400 (invalid_queue_name). The
    cursor's pattern says what a page's next link carries; NUL in one is refused as a bad cursor
    (it was a field error with code "invalid")."""
    prefix = json.dumps(_parameter("/api/queues/", "get", "prefix")["schema"])
    assert "^[A-Za-z0-9._-]{0,200}$" in prefix
    assert _parameter("/api/queues/{name}/items/", "get", "cursor")["schema"]["pattern"] == "^[A-Za-z0-9_-]+$"
    assert_error(api.get(API + "?prefix=" + "%C3%9B%C3%AD"), 400, "invalid_queue_name")
    make_queue(api, "q")
    assert_error(api.get(queue_url("q", "items") + "?cursor=abc%00"), 400, "invalid_cursor")


def test_dedup_key_says_it_takes_no_nul():
    """A dedup_key with NUL is refused (Django REST framework's CharField), so the schema says so."""
    pattern = re.compile(_component("PushItem")["properties"]["dedup_key"]["pattern"])
    assert pattern.search("any key, even é or 😀") and not pattern.search("a\x00b")
