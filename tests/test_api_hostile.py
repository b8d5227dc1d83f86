"""Hand-written hostile input for the reliable-consumption fields (issue 12, "Hostile input").

One table: every row is a request with one bad part, sent to a store that has a live lease,
dead letters and pages to follow. Each must get a clear 4xx (JSON with "detail" and "code") and
leave every key of the store as it was. The table adds what test_api_leases.py does not already
try: NaN and infinities where the JSON parser yields them, numbers beyond any float, lists and
objects for numbers, non-ASCII digits, NUL, lone surrogates, non-ISO spellings of a time, and
receipts, item ids and cursors that are tampered, re-spelled or taken from somewhere else.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from rest_framework.test import APIClient

from .api_helpers import API, assert_error, make_queue, push, queue_url
from .api_helpers import api, user  # noqa: F401 - fixtures, found by name (api needs user)
from django_fdbqueue.service._internals import tokens

pytestmark = pytest.mark.django_db

TOMORROW = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)).strftime("%Y-%m-%d")
FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


# ----------------------------------------------------------------------------- the store under attack


@dataclass
class Target:
    """What the rows aim at: a live lease on "q", dead letters of "dq", and cursors."""

    receipt: str
    other_receipt: str  # a live lease on "pq"
    dead_id: str
    ready_id: str
    items_cursor: str  # of q's items listing, from the min end
    dead_cursor: str  # of dq's dead-letter listing
    list_cursor: str  # of the queue list
    scheduled_cursor: str  # of q's scheduled listing


def _next_cursor(api: APIClient, url: str) -> str:
    page = api.get(url).json()
    return parse_qs(urlsplit(page["next"]).query)["cursor"][0]


@pytest.fixture
def target(api: APIClient) -> Target:
    make_queue(api, "q")
    make_queue(api, "pq", "priority")
    make_queue(api, "dq", max_attempts=1)
    for n in range(3):
        assert push(api, "q", {"value": n}).status_code == 201
        assert push(api, "pq", {"value": n, "priority": n}).status_code == 201
        assert push(api, "dq", {"value": f"dead {n}"}).status_code == 201
    assert push(api, "q", {"value": "later", "delay": 600}).status_code == 201
    receipt = api.post(queue_url("q", "claim"), {"lease": 600}, format="json").json()["receipt"]
    other = api.post(queue_url("pq", "claim"), {"lease": 600}, format="json").json()["receipt"]
    for _ in range(2):
        lease = api.post(queue_url("dq", "claim"), {}, format="json").json()
        assert api.post(queue_url("dq", "release"), {"receipt": lease["receipt"]}, format="json").json() == {
            "state": "dead"
        }
    dead_id = api.get(queue_url("dq", "dead-letters")).json()["results"][0]["id"]
    ready_id = api.get(queue_url("q", "items")).json()["results"][0]["id"]
    return Target(
        receipt=receipt,
        other_receipt=other,
        dead_id=dead_id,
        ready_id=ready_id,
        items_cursor=_next_cursor(api, queue_url("q", "items") + "?limit=1"),
        dead_cursor=_next_cursor(api, queue_url("dq", "dead-letters") + "?limit=1"),
        list_cursor=_next_cursor(api, API + "?limit=1"),
        scheduled_cursor=_next_cursor(api, queue_url("q", "scheduled") + "?limit=1"),
    )


def store_keys(database: Any, settings: Any) -> list[tuple[bytes, bytes]]:
    """Every key and value of the app's store (its ROOT subspace)."""
    from django_fdbqueue.fdbapi import fdb

    space = fdb.Subspace(tuple(settings.FDBQUEUE["ROOT"]))
    return [(kv.key, kv.value) for kv in database.get_range(space.range().start, space.range().stop)]


# ----------------------------------------------------------------------------- token surgery


def _respell(token: str) -> str:
    """The same bytes, spelled differently: the last character's unused low bits set, or padding
    added. Tokens have one spelling, so this must be refused, not read as the original."""
    if len(token) % 4 in (2, 3):
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        last = alphabet.index(token[-1])
        unused = 0b1111 if len(token) % 4 == 2 else 0b11
        respelled = token[:-1] + alphabet[last | unused if last & unused != unused else last & ~unused]
        assert base64.urlsafe_b64decode(respelled + "=" * (-len(respelled) % 4)) == base64.urlsafe_b64decode(
            token + "=" * (-len(token) % 4)
        )
        return respelled
    return token + "=="


def _flip(token: str, at: int) -> str:
    """One character changed in the middle: still base64, different bytes."""
    return token[:at] + ("B" if token[at] != "B" else "C") + token[at + 1 :]


def _reforged(receipt: str, **changes: Any) -> str:
    """A receipt of the right shape rebuilt with some parts changed (the token, the item)."""
    from dataclasses import replace

    return replace(tokens.parse_receipt(receipt), **changes).encode()


def _other_item(other: str) -> dict[str, Any]:
    """The place of the item another receipt leases."""

    theirs = tokens.parse_receipt(other)
    return {"priority": theirs.priority, "stamp": theirs.stamp}


# ----------------------------------------------------------------------------- the table

# A request: (method, path, body). A str body is sent as raw JSON text; a dict is JSON-encoded.
Request = tuple[str, str, Any]
Row = Callable[[Target], Request]


def claim(body: Any) -> Row:
    return lambda t: ("post", queue_url("q", "claim"), body)


def claim_pq(body: Any) -> Row:
    return lambda t: ("post", queue_url("pq", "claim"), body)


def pop(query: str) -> Row:
    return lambda t: ("post", queue_url("q", "pop") + "?" + query, None)


def push_q(body: Any) -> Row:
    return lambda t: ("post", queue_url("q", "push"), body)


def release(extra: dict[str, Any] | str) -> Row:
    if isinstance(extra, str):  # raw JSON after the receipt
        return lambda t: ("post", queue_url("q", "release"), '{"receipt": "%s", %s}' % (t.receipt, extra))
    return lambda t: ("post", queue_url("q", "release"), {"receipt": t.receipt, **extra})


def extend(extra: dict[str, Any] | str) -> Row:
    if isinstance(extra, str):
        return lambda t: ("post", queue_url("q", "extend"), '{"receipt": "%s", %s}' % (t.receipt, extra))
    return lambda t: ("post", queue_url("q", "extend"), {"receipt": t.receipt, **extra})


def ack_with(make: Callable[[Target], Any], raw: bool = False, queue: str = "q") -> Row:
    """POST ack with the receipt ``make`` builds (``raw``: spliced into the JSON text as is)."""

    def row(t: Target) -> Request:
        receipt = make(t)
        if raw:
            return ("post", queue_url(queue, "ack"), '{"receipt": "%s"}' % receipt)
        return ("post", queue_url(queue, "ack"), {"receipt": receipt})

    return row


def extend_with(make: Callable[[Target], str]) -> Row:
    return lambda t: ("post", queue_url("q", "extend"), {"receipt": make(t), "seconds": 5})


def release_with(make: Callable[[Target], str]) -> Row:
    return lambda t: ("post", queue_url("q", "release"), {"receipt": make(t)})


def dead_letter(make: Callable[[Target], str], requeue: bool = False, queue: str = "dq") -> Row:
    def row(t: Target) -> Request:
        path = queue_url(queue, f"dead-letters/{make(t)}")
        return ("post", path + "requeue/", None) if requeue else ("delete", path, None)

    return row


def listing(path: str, make: Callable[[Target], str]) -> Row:
    """GET ``path`` with ?cursor= (``path`` may end with "?...&" to send more parameters)."""
    joiner = "" if path.endswith("&") else "?"
    return lambda t: ("get", path + joiner + "cursor=" + make(t), None)


def get(path: str) -> Row:
    return lambda t: ("get", path, None)


def create(body: Any) -> Row:
    return lambda t: ("post", API, body)


def patch_dq(body: Any) -> Row:
    return lambda t: ("patch", queue_url("dq"), body)


def not_before(value: Any) -> Row:
    return push_q({"value": 1, "not_before": value})


def at(time: str) -> str:
    """Tomorrow at ``time``: a moment the API would take, so that only the spelling is wrong."""
    return f"{TOMORROW}T{time}"


def _in_367_days() -> str:
    return (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=367)).isoformat()


def _standard_base64(token: str) -> str:
    return base64.b64encode(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))).decode()


ITEMS, SCHEDULED, DEAD = queue_url("q", "items"), queue_url("q", "scheduled"), queue_url("dq", "dead-letters")
BIG = 1.7976931348623157e308  # the largest float
TINY = -5e-324  # the negative float closest to 0

# (id, request, status or the statuses either of which is right, code)
ROWS: list[tuple[str, Row, int | set[int], str | None]] = [
    # -- lease (claim's body)
    ("lease beyond float range", claim('{"lease": 1e999}'), 400, "invalid"),
    ("lease largest float", claim({"lease": BIG}), 400, "invalid"),
    ("lease tiny negative", claim({"lease": TINY}), 400, "invalid"),
    ("lease negative zero", claim('{"lease": -0.0}'), 400, "invalid"),
    ("lease underflows to zero", claim('{"lease": 1e-400}'), 400, "invalid"),
    ("lease just past 12 h", claim({"lease": 43_200.000001}), 400, "invalid"),
    ("lease in a list", claim({"lease": [30]}), 400, "invalid"),
    ("lease as an object", claim({"lease": {"seconds": 30}}), 400, "invalid"),
    ("lease as 'NaN' text", claim({"lease": "NaN"}), 400, "invalid"),
    ("lease empty text", claim({"lease": ""}), 400, "invalid"),
    ("lease huge integer", claim({"lease": 10**30}), 400, "invalid"),
    ("lease 5,000-digit integer", claim('{"lease": 1' + "0" * 5000 + "}"), 400, "parse_error"),
    # -- wait (claim's body; pop's query)
    ("wait NaN", claim('{"wait": NaN}'), 400, "parse_error"),
    ("wait -Infinity", claim('{"wait": -Infinity}'), 400, "parse_error"),
    ("wait null", claim({"wait": None}), 400, "invalid"),
    ("wait true", claim({"wait": True}), 400, "invalid"),
    ("wait in a list", claim({"wait": [1]}), 400, "invalid"),
    ("wait largest float", claim({"wait": BIG}), 400, "invalid"),
    ("wait tiny negative", claim({"wait": TINY}), 400, "invalid"),
    ("wait on the max end of a FIFO", claim({"wait": 1, "end": "max"}), 400, "wrong_queue_kind"),
    ("?wait= fullwidth digit", pop("wait=" + quote("１")), 400, "invalid"),
    ("?wait= Arabic-Indic digit", pop("wait=" + quote("٣")), 400, "invalid"),
    ("?wait= 51 digits", pop("wait=" + "0" * 50 + "1"), 400, "invalid"),
    ("?wait= NUL", pop("wait=%00"), 400, "invalid"),
    ("?wait= 1 then NUL", pop("wait=1%00"), 400, "invalid"),
    ("?wait= emoji", pop("wait=" + quote("😀")), 400, "invalid"),
    ("?wait= lone surrogate bytes", pop("wait=%ED%A0%80"), 400, "invalid"),
    ("?wait= exponent only", pop("wait=5e"), 400, "invalid"),
    ("?wait= twice, second bad", pop("wait=1&wait=-1"), 400, "invalid"),
    # -- delay (push's body; release's body)
    ("push delay NaN", push_q('{"value": 1, "delay": NaN}'), 400, "parse_error"),
    ("push delay Infinity", push_q('{"value": 1, "delay": Infinity}'), 400, "parse_error"),
    ("push delay largest float", push_q({"value": 1, "delay": BIG}), 400, "invalid"),
    ("push delay tiny negative", push_q({"value": 1, "delay": TINY}), 400, "invalid"),
    ("push delay in a list", push_q({"value": 1, "delay": [5]}), 400, "invalid"),
    ("push delay as an object", push_q({"value": 1, "delay": {}}), 400, "invalid"),
    ("push delay empty text", push_q({"value": 1, "delay": ""}), 400, "invalid"),
    ("batch delay NaN", push_q('{"items": [{"value": 1}], "delay": NaN}'), 400, "parse_error"),
    ("batch entry with its own delay", push_q({"items": [{"value": 1, "delay": 5}]}), 400, "invalid"),
    ("release delay NaN", release('"delay": NaN'), 400, "parse_error"),
    ("release delay -Infinity", release('"delay": -Infinity'), 400, "parse_error"),
    ("release delay beyond float range", release('"delay": 1e999'), 400, "invalid"),
    ("release delay in a list", release({"delay": [0]}), 400, "invalid"),
    ("release delay tiny negative", release({"delay": TINY}), 400, "invalid"),
    # -- seconds (extend's body)
    ("extend seconds NaN", extend('"seconds": NaN'), 400, "parse_error"),
    ("extend seconds Infinity", extend('"seconds": Infinity'), 400, "parse_error"),
    ("extend seconds underflows to zero", extend('"seconds": 1e-400'), 400, "invalid"),
    ("extend seconds negative zero", extend('"seconds": -0.0'), 400, "invalid"),
    ("extend seconds largest float", extend({"seconds": BIG}), 400, "invalid"),
    ("extend seconds in a list", extend({"seconds": [5]}), 400, "invalid"),
    ("extend seconds as text", extend({"seconds": "5"}), 400, "invalid"),
    # -- not_before (push's body). Django's parse_datetime read the first four as times.
    ("not_before fullwidth digits", not_before(at("00:00:00Z").translate(FULLWIDTH)), 400, "invalid"),
    ("not_before trailing newline", not_before(at("00:00:00Z\n")), 400, "invalid"),
    ("not_before NUL before the offset", not_before(at("00:00:00\x00Z")), 400, "invalid"),
    ("not_before week date", not_before(f"{TOMORROW[:4]}-W01-1T00:00:00Z"), 400, "invalid"),
    ("not_before one-digit fields", not_before(f"{TOMORROW[:5]}1-1T0:0:0Z"), 400, "invalid"),
    ("not_before lone surrogate", push_q('{"value": 1, "not_before": "%s\\ud800Z"}' % at("00:00:00")), 400, "invalid"),
    ("not_before offset +25:00", not_before(at("00:00:00+25:00")), 400, "invalid"),
    ("not_before hour 24", not_before(at("24:00:00Z")), 400, "invalid"),
    ("not_before leap second", not_before(at("23:59:60Z")), 400, "invalid"),
    ("not_before out of range in UTC", not_before("9999-12-31T23:59:59-23:59"), 400, "invalid"),
    ("not_before 10,000 characters", not_before("2" * 10_000), 400, "invalid"),
    ("not_before in a list", not_before([at("00:00:00Z")]), 400, "invalid"),
    ("not_before true", not_before(True), 400, "invalid"),
    ("not_before 367 days ahead", lambda t: not_before(_in_367_days())(t), 400, "invalid_argument"),
    # -- dedup_key (push's body)
    ("dedup_key NUL", push_q({"value": 1, "dedup_key": "\x00"}), 400, "invalid"),
    ("dedup_key NUL inside", push_q({"value": 1, "dedup_key": "a\x00b"}), 400, "invalid"),
    ("dedup_key lone low surrogate", push_q('{"value": 1, "dedup_key": "\\udc00"}'), 400, "invalid"),
    ("dedup_key 201 emoji", push_q({"value": 1, "dedup_key": "😀" * 201}), 400, "invalid"),
    ("dedup_key 100,000 characters", push_q({"value": 1, "dedup_key": "k" * 100_000}), 400, "invalid"),
    ("dedup_key as an object", push_q({"value": 1, "dedup_key": {"k": 1}}), 400, "invalid"),
    ("dedup_key as a number", push_q({"value": 1, "dedup_key": 1.5}), 400, "invalid"),
    # -- max_attempts (create; patch)
    ("create max_attempts huge integer", create({"name": "new", "max_attempts": 10**400}), 400, "invalid"),
    ("create max_attempts 1e3", create('{"name": "new", "max_attempts": 1e3}'), 400, "invalid"),
    ("create max_attempts 1000.0", create({"name": "new", "max_attempts": 1000.0}), 400, "invalid"),
    ("create max_attempts NaN", create('{"name": "new", "max_attempts": NaN}'), 400, "parse_error"),
    ("create max_attempts 2**63", create({"name": "new", "max_attempts": 2**63}), 400, "invalid"),
    ("create max_attempts -2**63-1", create({"name": "new", "max_attempts": -(2**63) - 1}), 400, "invalid"),
    ("create max_attempts as text", create({"name": "new", "max_attempts": "5"}), 400, "invalid"),
    ("patch max_attempts huge integer", patch_dq({"max_attempts": 10**400}), 400, "invalid"),
    ("patch max_attempts Infinity", patch_dq('{"max_attempts": Infinity}'), 400, "parse_error"),
    ("patch max_attempts -0.0", patch_dq('{"max_attempts": -0.0}'), 400, "invalid"),
    ("patch max_attempts as an object", patch_dq({"max_attempts": {}}), 400, "invalid"),
    ("patch max_attempts and an unknown field", patch_dq({"max_attempts": 5, "kind": "priority"}), 400, "invalid"),
    # -- receipts
    (
        "receipt with one character changed",
        ack_with(lambda t: _flip(t.receipt, len(t.receipt) // 2)),
        409,
        "lease_not_found",
    ),
    ("receipt re-spelled, same bytes", ack_with(lambda t: _respell(t.receipt)), 400, "invalid_receipt"),
    ("receipt with padding", ack_with(lambda t: t.receipt + "=="), 400, "invalid_receipt"),
    ("receipt in standard base64", ack_with(lambda t: _standard_base64(t.receipt)), 400, "invalid_receipt"),
    # Cut short by one character, a receipt used to decode to itself (the tuple layer reads the
    # unterminated secret to the end) and ack the lease: a second spelling, now refused.
    ("receipt truncated by one", ack_with(lambda t: t.receipt[:-1]), 400, "invalid_receipt"),
    ("receipt truncated by two", ack_with(lambda t: t.receipt[:-2]), 400, "invalid_receipt"),
    ("receipt with NUL", ack_with(lambda t: t.receipt[:8] + "\x00" + t.receipt[8:]), 400, "invalid_receipt"),
    (
        "receipt with a lone surrogate",
        ack_with(lambda t: t.receipt[:8] + "\\ud800" + t.receipt[8:], raw=True),
        400,
        "invalid_receipt",
    ),
    ("receipt with a space", ack_with(lambda t: " " + t.receipt), 400, "invalid_receipt"),
    (
        "receipt, right shape, wrong token",
        ack_with(lambda t: _reforged(t.receipt, token=os.urandom(16))),
        409,
        "lease_not_found",
    ),
    (
        "receipt, right token, other item",
        ack_with(lambda t: _reforged(t.receipt, **_other_item(t.other_receipt))),
        409,
        "lease_not_found",
    ),
    ("receipt of another queue", ack_with(lambda t: t.other_receipt), 400, "invalid_receipt"),
    (
        "receipt renamed to this queue",
        ack_with(lambda t: _reforged(t.receipt, name="pq"), queue="pq"),
        409,
        "lease_not_found",
    ),
    ("receipt of a dead letter's id", ack_with(lambda t: t.dead_id), 400, "invalid_receipt"),
    ("receipt that is a cursor", ack_with(lambda t: t.items_cursor), 400, "invalid_receipt"),
    (
        "extend with a forged token",
        extend_with(lambda t: _reforged(t.receipt, token=b"\x00" * 16)),
        409,
        "lease_not_found",
    ),
    ("release with a receipt of another queue", release_with(lambda t: t.other_receipt), 400, "invalid_receipt"),
    # -- item ids (dead-letter routes)
    ("item id re-spelled, same bytes", dead_letter(lambda t: _respell(t.dead_id)), 400, "invalid_argument"),
    ("item id with padding", dead_letter(lambda t: t.dead_id + "%3D%3D"), 400, "invalid_argument"),
    ("item id with NUL", dead_letter(lambda t: t.dead_id + "%00"), 400, "invalid_argument"),
    ("item id with é", dead_letter(lambda t: t.dead_id + "%C3%A9"), 400, "invalid_argument"),
    ("item id of lone surrogate bytes", dead_letter(lambda t: "%ED%A0%80"), 400, "invalid_argument"),
    ("item id 2,001 characters", dead_letter(lambda t: "A" * 2001), 400, "invalid_argument"),
    ("item id that is a receipt", dead_letter(lambda t: t.receipt), 400, "invalid_argument"),
    ("item id of a ready item, requeue", dead_letter(lambda t: t.ready_id, requeue=True), 404, "dead_letter_not_found"),
    ("item id one character changed", dead_letter(lambda t: _flip(t.dead_id, len(t.dead_id) // 2)), {400, 404}, None),
    ("dead letter of another queue", dead_letter(lambda t: t.dead_id, queue="q"), 404, "dead_letter_not_found"),
    # -- cursors
    ("items cursor re-spelled", listing(ITEMS, lambda t: _respell(t.items_cursor)), 400, "invalid_cursor"),
    ("items cursor with padding", listing(ITEMS, lambda t: t.items_cursor + "%3D"), 400, "invalid_cursor"),
    ("items cursor from the other end", listing(ITEMS + "?end=max&", lambda t: t.items_cursor), 400, "invalid_cursor"),
    ("dead-letter cursor on items", listing(ITEMS, lambda t: t.dead_cursor), 400, "invalid_cursor"),
    ("queue-list cursor on dead letters", listing(DEAD, lambda t: t.list_cursor), 400, "invalid_cursor"),
    ("items cursor on the queue list", listing(API, lambda t: t.items_cursor), 400, "invalid_cursor"),
    ("receipt as a cursor", listing(SCHEDULED, lambda t: t.receipt), 400, "invalid_cursor"),
    ("cursor with NUL", listing(ITEMS, lambda t: t.items_cursor + "%00"), 400, "invalid_cursor"),
    ("queue-list cursor truncated by one", listing(API, lambda t: t.list_cursor[:-1]), 400, "invalid_cursor"),
    ("scheduled cursor truncated by one", listing(SCHEDULED, lambda t: t.scheduled_cursor[:-1]), 400, "invalid_cursor"),
    ("scheduled cursor re-spelled", listing(SCHEDULED, lambda t: _respell(t.scheduled_cursor)), 400, "invalid_cursor"),
    ("cursor of lone surrogate bytes", listing(ITEMS, lambda t: "%ED%A0%80"), 400, "invalid_cursor"),
    ("cursor 100,000 characters", listing(DEAD, lambda t: "A" * 100_000), 400, "invalid_cursor"),
    # Cursors are positions, not secrets: a changed one is refused, or names another position.
    ("cursor one character changed", listing(ITEMS, lambda t: _flip(t.items_cursor, 20)), {200, 400}, None),
    ("?limit= fullwidth digit", get(ITEMS + "?limit=" + quote("５")), 400, "invalid"),
    ("?limit= Arabic-Indic digit", get(API + "?limit=" + quote("٥")), 400, "invalid"),
    ("?limit= with a space", get(DEAD + "?limit=%205"), 400, "invalid"),
    ("?limit= 5.0", get(SCHEDULED + "?limit=5.0"), 400, "invalid"),
]


def _send(api: APIClient, request: Request) -> Any:
    method, path, body = request
    call = getattr(api, method)
    if body is None:
        return call(path)
    if isinstance(body, str):
        return call(path, data=body.encode("utf-8", "surrogatepass"), content_type="application/json")
    return call(path, data=json.dumps(body), content_type="application/json")


@pytest.mark.parametrize(("row", "status", "code"), [pytest.param(r, s, c, id=i) for i, r, s, c in ROWS])
def test_hostile_input_is_a_clear_4xx_that_changes_nothing(api, target, fdbqueue_db, settings, row, status, code):
    before = store_keys(fdbqueue_db, settings)
    response = _send(api, row(target))
    if isinstance(status, set):
        assert response.status_code in status, response.content
        if response.status_code >= 400:
            assert_error(response, response.status_code)
    else:
        assert_error(response, status, code)
    assert store_keys(fdbqueue_db, settings) == before
    # The lease the rows attack is still there, and still ours.
    assert api.post(queue_url("q", "ack"), {"receipt": target.receipt}, format="json").status_code == 204
