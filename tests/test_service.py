"""The queue service: every operation and error, ordering, atomic composition, batches, browsing.

Runs on the embedded engine always and on a real cluster when one is configured (the
`fdbqueue_db` fixture points the app at a fresh store or a fresh ROOT).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import re
import threading
import time

import pytest

from django_fdbqueue.service.extension import runtime
from django_fdbqueue import codecs, exceptions, service
from django_fdbqueue.connection import root_subspace
from django_fdbqueue.fdbapi import FDBError, fdb, make_error, transactional
from django_fdbqueue.service._internals import items as service_items
from django_fdbqueue.service._internals import catalog as service_catalog
from django_fdbqueue.service._internals.keys import DELETIONS, QueueKeys
from django_fdbqueue.service._internals.tokens import item_id

URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


# --- helpers ---------------------------------------------------------------------------------


def dump(db) -> list[tuple[bytes, bytes]]:
    """Every key-value under the app's root: to show that a refused call changed nothing."""
    r = root_subspace().range()
    return [(bytes(kv.key), bytes(kv.value)) for kv in db.get_range(r.start, r.stop)]


def values(items) -> list:
    return [item.value for item in items]


def drain(db, name, end="min") -> list:
    out = []
    while (item := service.pop(db, name, end)) is not None:
        out.append(item)
    return out


class CountingDatabase:
    """A database that counts the transactions the service opens on it."""

    def __init__(self, db):
        self._db = db
        self.transactions = 0

    def create_transaction(self):
        self.transactions += 1
        return self._db.create_transaction()


class CountingTransaction:
    """A transaction that counts the key-values its range reads return."""

    def __init__(self, tr):
        self._tr = tr
        self.rows = 0

    def get_range(self, *args, **kwargs):
        rows = list(self._tr.get_range(*args, **kwargs))
        self.rows += len(rows)
        return rows

    def __getitem__(self, key):
        return self._tr[key]

    def __getattr__(self, name):
        return getattr(self._tr, name)


@pytest.fixture
def pq(fdbqueue_db):
    service.create_queue(fdbqueue_db, "pq", kind="priority")
    return "pq"


@pytest.fixture
def fifo(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs")
    return "jobs"


# --- catalog ---------------------------------------------------------------------------------


def test_create_queue_returns_empty_description(fdbqueue_db):
    before = dt.datetime.now(dt.timezone.utc)
    info = service.create_queue(fdbqueue_db, "emails")
    assert info.name == "emails" and info.kind == "fifo"
    assert (info.size, info.pushed, info.popped) == (0, 0, 0)
    assert info.min_priority is info.max_priority is info.oldest_enqueued_at is None
    assert info.oldest_age_seconds is None
    assert info.created_at.tzinfo is not None
    assert before - dt.timedelta(seconds=5) <= info.created_at <= dt.datetime.now(dt.timezone.utc)
    assert service.get_queue(fdbqueue_db, "emails") == info
    assert service.queue_exists(fdbqueue_db, "emails")
    assert not service.queue_exists(fdbqueue_db, "other")


def test_create_existing_name_is_an_error_not_an_overwrite(fdbqueue_db):
    service.create_queue(fdbqueue_db, "q", kind="priority")
    service.push(fdbqueue_db, "q", "kept", 3)
    with pytest.raises(exceptions.QueueAlreadyExists) as caught:
        service.create_queue(fdbqueue_db, "q", kind="fifo")
    assert caught.value.code == "queue_already_exists"
    assert "q" in caught.value.message
    info = service.get_queue(fdbqueue_db, "q")
    assert info.kind == "priority" and info.size == 1


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 200, "..", "-"])
def test_valid_names(fdbqueue_db, name):
    assert service.create_queue(fdbqueue_db, name).name == name
    assert service.queue_exists(fdbqueue_db, name)


@pytest.mark.parametrize("name", ["", "x" * 201, "a b", "a/b", "é", "tab\t", "nl\n", "a:b", None, 5, b"abc"])
def test_invalid_names(fdbqueue_db, name):
    with pytest.raises(exceptions.InvalidQueueName) as caught:
        service.create_queue(fdbqueue_db, name)
    assert caught.value.code == "invalid_queue_name"
    assert "1 to 200" in caught.value.message
    with pytest.raises(exceptions.InvalidQueueName):
        service.push(fdbqueue_db, name, 1)


@pytest.mark.parametrize("kind", ["FIFO", "stack", "", None])
def test_invalid_kind(fdbqueue_db, kind):
    with pytest.raises(exceptions.InvalidArgument) as caught:
        service.create_queue(fdbqueue_db, "q", kind=kind)
    assert caught.value.code == "invalid_argument"
    assert not service.queue_exists(fdbqueue_db, "q")


OPERATIONS_ON_A_QUEUE = [
    ("get_queue", ()),
    ("delete_queue", ()),
    ("enqueue", ("v",)),
    ("dequeue", ()),
    ("peek", ()),
    ("push", ("v", 1)),
    ("pop", ()),
    ("pop_min", ()),
    ("pop_max", ()),
    ("peek_min", ()),
    ("peek_max", ()),
    ("size", ()),
    ("empty", ()),
    ("clear", ()),
    ("push_many", (["a", "b"],)),
    ("pop_many", (3,)),
    ("browse", ()),
    ("get_item", (item_id(0, fdb.tuple.Versionstamp(b"\x00" * 10, 0)),)),
]


@pytest.mark.parametrize("operation, args", OPERATIONS_ON_A_QUEUE, ids=[op for op, _ in OPERATIONS_ON_A_QUEUE])
def test_every_operation_on_a_missing_queue_raises_not_found(fdbqueue_db, operation, args):
    with pytest.raises(exceptions.QueueNotFound) as caught:
        getattr(service, operation)(fdbqueue_db, "missing", *args)
    assert caught.value.code == "queue_not_found"
    assert "missing" in caught.value.message
    assert dump(fdbqueue_db) == []


def test_delete_removes_the_queue_and_every_key_it_had(fdbqueue_db, pq):
    service.push_many(fdbqueue_db, pq, [("a", 1), ("b", 2), ("c", 3)])
    service.pop_min(fdbqueue_db, pq)
    service.create_queue(fdbqueue_db, "other")
    service.enqueue(fdbqueue_db, "other", "stays")
    other_keys = dump(fdbqueue_db)
    service.delete_queue(fdbqueue_db, pq)
    assert not service.queue_exists(fdbqueue_db, pq)
    with pytest.raises(exceptions.QueueNotFound):
        service.size(fdbqueue_db, pq)
    with pytest.raises(exceptions.QueueNotFound):
        service.delete_queue(fdbqueue_db, pq)
    remaining, markers = without_deletion_markers(dump(fdbqueue_db))
    assert remaining and set(remaining) < set(other_keys)
    assert len(markers) == 1  # the proof this delete committed, for its retries (short-lived)
    service.delete_queue(fdbqueue_db, "other")
    remaining, markers = without_deletion_markers(dump(fdbqueue_db))
    assert remaining == []  # nothing left behind: not items, index entries or counters
    assert len(markers) == 2


def without_deletion_markers(rows):
    markers = root_subspace()[DELETIONS].range()
    inside = [row for row in rows if markers.start <= row[0] < markers.stop]
    return [row for row in rows if row not in inside], inside


def test_recreated_queue_never_sees_the_old_items(fdbqueue_db, pq):
    old = service.push(fdbqueue_db, pq, "old", 1)
    service.delete_queue(fdbqueue_db, pq)
    info = service.create_queue(fdbqueue_db, pq, kind="priority")
    assert info.size == 0
    assert service.pop_min(fdbqueue_db, pq) is None
    assert service.get_item(fdbqueue_db, pq, old.id) is None
    assert service.get_queue(fdbqueue_db, pq).pushed == 0


# --- list_queues -----------------------------------------------------------------------------


def test_list_queues_pages_in_name_order(fdbqueue_db):
    names = ["b", "a", "c.1", "B", "c-2", "d", "a0"]
    for name in names:
        service.create_queue(fdbqueue_db, name, kind="priority" if name < "c" else "fifo")
    service.push(fdbqueue_db, "a", "x", 7)
    seen, cursor, pages = [], None, 0
    while True:
        page = service.list_queues(fdbqueue_db, cursor=cursor, limit=3)
        pages += 1
        assert len(page.items) <= 3
        seen.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
        assert URL_SAFE.fullmatch(cursor)
    assert [info.name for info in seen] == sorted(names)  # byte order: upper case first
    assert pages == 3
    by_name = {info.name: info for info in seen}
    assert by_name["a"].size == 1 and by_name["a"].max_priority == 7 and by_name["a"].kind == "priority"
    assert by_name["d"].kind == "fifo" and by_name["d"].size == 0


def test_list_queues_exact_last_page_has_no_cursor(fdbqueue_db):
    for name in ["q1", "q2", "q3"]:
        service.create_queue(fdbqueue_db, name)
    page = service.list_queues(fdbqueue_db, limit=3)
    assert [i.name for i in page.items] == ["q1", "q2", "q3"] and page.next_cursor is None
    assert service.list_queues(fdbqueue_db).items[0].name == "q1"


def test_list_queues_with_prefix(fdbqueue_db):
    for name in ["app.a", "app.b", "app", "apple", "zzz", "ap"]:
        service.create_queue(fdbqueue_db, name)
    page = service.list_queues(fdbqueue_db, prefix="app.", limit=1)
    assert [i.name for i in page.items] == ["app.a"]
    page = service.list_queues(fdbqueue_db, prefix="app.", cursor=page.next_cursor, limit=1)
    assert [i.name for i in page.items] == ["app.b"] and page.next_cursor is None
    assert [i.name for i in service.list_queues(fdbqueue_db, prefix="app").items] == ["app", "app.a", "app.b", "apple"]
    assert service.list_queues(fdbqueue_db, prefix="nothing").items == []


def test_list_queues_cursor_survives_deletion_of_its_queue(fdbqueue_db):
    for name in ["a", "b", "c", "d"]:
        service.create_queue(fdbqueue_db, name)
    page = service.list_queues(fdbqueue_db, limit=2)
    service.delete_queue(fdbqueue_db, "b")
    assert [i.name for i in service.list_queues(fdbqueue_db, cursor=page.next_cursor).items] == ["c", "d"]


def test_list_queues_costs_one_page_of_reads(fdbqueue_db):
    for i in range(40):
        service.create_queue(fdbqueue_db, f"q{i:02d}")
    first_page = service.list_queues(fdbqueue_db, limit=3)
    tr = fdbqueue_db.create_transaction()
    counting = CountingTransaction(tr)
    page = service.list_queues(counting, cursor=first_page.next_cursor, limit=3)
    assert [i.name for i in page.items] == ["q03", "q04", "q05"]
    # limit + 1 catalog rows, plus at most 3 statistic rows per listed (empty) queue
    assert counting.rows <= 3 + 1 + 3 * 3


@pytest.mark.parametrize("limit", [0, -1, 1001, "5", 2.0, True, None])
def test_list_queues_rejects_bad_limits(fdbqueue_db, limit):
    with pytest.raises(exceptions.InvalidArgument):
        service.list_queues(fdbqueue_db, limit=limit)


@pytest.mark.parametrize("prefix", ["a b", "é", None, "x" * 201])
def test_list_queues_rejects_bad_prefixes(fdbqueue_db, prefix):
    with pytest.raises(exceptions.InvalidArgument):
        service.list_queues(fdbqueue_db, prefix=prefix)


def test_list_queues_rejects_foreign_cursors(fdbqueue_db, pq):
    item = service.push(fdbqueue_db, pq, "x")
    service.push(fdbqueue_db, pq, "y")
    browse_cursor = service.browse(fdbqueue_db, pq, limit=1).next_cursor
    assert browse_cursor is not None
    for cursor in ["", "!!!", "AAAA", "a" * 3000, item.id, browse_cursor, 17]:
        with pytest.raises(exceptions.InvalidCursor) as caught:
            service.list_queues(fdbqueue_db, cursor=cursor)
        assert caught.value.code == "invalid_cursor"


# --- push, pop, peek: order ------------------------------------------------------------------


def test_push_returns_the_committed_item(fdbqueue_db, pq):
    before = dt.datetime.now(dt.timezone.utc)
    item = service.push(fdbqueue_db, pq, {"n": 1, "tags": ["a"]}, priority=4)
    assert isinstance(item, service.Item)
    assert URL_SAFE.fullmatch(item.id)
    assert (item.priority, item.value) == (4, {"n": 1, "tags": ["a"]})
    assert item.enqueued_at.tzinfo is not None
    assert before - dt.timedelta(seconds=1) <= item.enqueued_at <= dt.datetime.now(dt.timezone.utc)
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.priority = 5
    assert service.peek_min(fdbqueue_db, pq) == item
    assert service.get_item(fdbqueue_db, pq, item.id) == item
    assert service.pop_min(fdbqueue_db, pq) == item
    assert service.get_item(fdbqueue_db, pq, item.id) is None


def test_order_is_priority_then_push_order_at_both_ends(fdbqueue_db, pq):
    pushes = [("a", 5), ("b", 1), ("c", 5), ("d", 3), ("e", 1), ("f", 5), ("g", 3)]
    for value, priority in pushes:
        service.push(fdbqueue_db, pq, value, priority)
    assert service.peek_min(fdbqueue_db, pq).value == "b"
    assert service.peek_max(fdbqueue_db, pq).value == "a"  # the earliest of the highest priority
    # min end: 1s, then 3s, then 5s, each in push order
    assert values(drain(fdbqueue_db, pq, "min")) == ["b", "e", "d", "g", "a", "c", "f"]
    for value, priority in pushes:
        service.push(fdbqueue_db, pq, value, priority)
    # max end: 5s, then 3s, then 1s, each in push order too (the recipe's reverse scan gives f, c, a)
    assert values(drain(fdbqueue_db, pq, "max")) == ["a", "c", "f", "d", "g", "b", "e"]


def test_mixed_ends(fdbqueue_db, pq):
    service.push_many(fdbqueue_db, pq, [("lo1", 0), ("hi1", 9), ("lo2", 0), ("hi2", 9), ("mid", 4)])
    assert service.pop_max(fdbqueue_db, pq).value == "hi1"
    assert service.pop_min(fdbqueue_db, pq).value == "lo1"
    assert service.pop(fdbqueue_db, pq, end="max").value == "hi2"
    assert service.peek(fdbqueue_db, pq, end="max").value == "mid"
    assert service.pop(fdbqueue_db, pq).value == "lo2"
    assert service.pop_min(fdbqueue_db, pq).value == "mid"
    assert service.pop_max(fdbqueue_db, pq) is None


def test_single_priority_both_ends_agree(fdbqueue_db, pq):
    service.push_many(fdbqueue_db, pq, [("a", 2), ("b", 2), ("c", 2)])
    assert service.pop_max(fdbqueue_db, pq).value == "a"
    assert service.pop_min(fdbqueue_db, pq).value == "b"
    assert service.pop_max(fdbqueue_db, pq).value == "c"


def test_peek_does_not_remove(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "x", 1)
    for _ in range(3):
        assert service.peek_min(fdbqueue_db, pq).value == "x"
        assert service.peek_max(fdbqueue_db, pq).value == "x"
    assert service.size(fdbqueue_db, pq) == 1


def test_empty_queue(fdbqueue_db, pq):
    for operation in (
        service.pop_min,
        service.pop_max,
        service.peek_min,
        service.peek_max,
        service.dequeue,
        service.peek,
    ):
        assert operation(fdbqueue_db, pq) is None
    assert service.empty(fdbqueue_db, pq)
    assert service.size(fdbqueue_db, pq) == 0
    assert service.pop_many(fdbqueue_db, pq, 5) == []
    page = service.browse(fdbqueue_db, pq)
    assert page.items == [] and page.next_cursor is None


@pytest.mark.parametrize("end", ["MIN", "front", "", None])
def test_bad_end(fdbqueue_db, pq, end):
    for operation in (service.pop, service.peek):
        with pytest.raises(exceptions.InvalidArgument):
            operation(fdbqueue_db, pq, end=end)
    with pytest.raises(exceptions.InvalidArgument):
        service.browse(fdbqueue_db, pq, end=end)
    with pytest.raises(exceptions.InvalidArgument):
        service.pop_many(fdbqueue_db, pq, 1, end=end)


def test_priority_range_is_signed_64_bit(fdbqueue_db, pq):
    lowest, highest = -(2**63), 2**63 - 1
    service.push_many(fdbqueue_db, pq, [("hi", highest), ("zero", 0), ("lo", lowest), ("neg", -1)])
    assert service.peek_min(fdbqueue_db, pq).priority == lowest
    assert service.peek_max(fdbqueue_db, pq).priority == highest
    assert values(drain(fdbqueue_db, pq)) == ["lo", "neg", "zero", "hi"]


@pytest.mark.parametrize("priority", [2**63, -(2**63) - 1, 1.0, "1", True, False, None, [1]])
def test_invalid_priorities(fdbqueue_db, pq, priority):
    with pytest.raises(exceptions.InvalidPriority) as caught:
        service.push(fdbqueue_db, pq, "v", priority)
    assert caught.value.code == "invalid_priority"
    with pytest.raises(exceptions.InvalidPriority):
        service.push_many(fdbqueue_db, pq, [("ok", 1), ("bad", priority)])
    assert service.size(fdbqueue_db, pq) == 0


# --- FIFO queues ---------------------------------------------------------------------------------


def test_fifo_queue(fdbqueue_db, fifo):
    for i in range(5):
        item = service.enqueue(fdbqueue_db, fifo, f"job-{i}")
        assert item.priority == 0
    assert service.size(fdbqueue_db, fifo) == 5
    assert not service.empty(fdbqueue_db, fifo)
    assert service.peek(fdbqueue_db, fifo).value == "job-0"
    assert service.dequeue(fdbqueue_db, fifo).value == "job-0"
    assert service.push(fdbqueue_db, fifo, "job-5", 0).priority == 0  # priority 0 is allowed
    assert values(service.browse(fdbqueue_db, fifo, limit=10).items) == [f"job-{i}" for i in range(1, 6)]
    assert values(service.pop_many(fdbqueue_db, fifo, 10)) == [f"job-{i}" for i in range(1, 6)]
    assert service.dequeue(fdbqueue_db, fifo) is None
    assert service.empty(fdbqueue_db, fifo)


def test_fifo_queue_refuses_priorities_and_the_max_end(fdbqueue_db, fifo):
    service.enqueue(fdbqueue_db, fifo, "a")
    refused = [
        lambda: service.push(fdbqueue_db, fifo, "b", 1),
        lambda: service.push_many(fdbqueue_db, fifo, ["c", ("d", -1)]),
        lambda: service.pop_max(fdbqueue_db, fifo),
        lambda: service.peek_max(fdbqueue_db, fifo),
        lambda: service.pop(fdbqueue_db, fifo, end="max"),
        lambda: service.peek(fdbqueue_db, fifo, end="max"),
        lambda: service.pop_many(fdbqueue_db, fifo, 2, end="max"),
        lambda: service.browse(fdbqueue_db, fifo, end="max"),
    ]
    for call in refused:
        with pytest.raises(exceptions.WrongQueueKind) as caught:
            call()
        assert caught.value.code == "wrong_queue_kind"
        assert "FIFO" in caught.value.message
    assert values(service.browse(fdbqueue_db, fifo).items) == ["a"]


def test_enqueue_and_dequeue_work_on_priority_queues(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "neg", -5)
    service.enqueue(fdbqueue_db, pq, "zero")
    assert service.dequeue(fdbqueue_db, pq).value == "neg"
    assert service.peek(fdbqueue_db, pq).value == "zero"


# --- statistics, size, clear ---------------------------------------------------------------------


def test_statistics(fdbqueue_db, pq):
    first = service.push(fdbqueue_db, pq, "first", 5)
    service.push_many(fdbqueue_db, pq, [("low", -3), ("high", 8), ("mid", 5)])
    info = service.get_queue(fdbqueue_db, pq)
    assert (info.size, info.pushed, info.popped) == (4, 4, 0)
    assert (info.min_priority, info.max_priority) == (-3, 8)
    assert info.oldest_enqueued_at == first.enqueued_at  # oldest by push order, not by priority
    assert 0 <= info.oldest_age_seconds < 60
    assert service.pop_max(fdbqueue_db, pq).value == "high"
    assert service.pop_max(fdbqueue_db, pq) == first
    info = service.get_queue(fdbqueue_db, pq)
    assert (info.size, info.pushed, info.popped) == (2, 4, 2)
    assert (info.min_priority, info.max_priority) == (-3, 5)
    assert info.oldest_enqueued_at > first.enqueued_at
    assert service.size(fdbqueue_db, pq) == 2 and not service.empty(fdbqueue_db, pq)


def test_clear_empties_the_queue_and_keeps_it(fdbqueue_db, pq):
    service.push_many(fdbqueue_db, pq, [(i, i % 3) for i in range(10)])
    service.pop_min(fdbqueue_db, pq)
    service.clear(fdbqueue_db, pq)
    info = service.get_queue(fdbqueue_db, pq)
    assert (info.size, info.pushed, info.popped) == (0, 10, 1)  # clearing is not popping
    assert info.min_priority is info.max_priority is info.oldest_enqueued_at is None
    assert service.empty(fdbqueue_db, pq) and service.pop_max(fdbqueue_db, pq) is None
    service.push(fdbqueue_db, pq, "after", 1)
    assert service.size(fdbqueue_db, pq) == 1
    assert service.pop_min(fdbqueue_db, pq).value == "after"


# --- values and codecs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -7, 2**62, 1.5, "", "héllo ✓", [], {}, [1, [2, {"a": None}]], {"k": "v", "n": [1.25]}, "\x00nul"],
)
def test_json_values_round_trip(fdbqueue_db, pq, value):
    pushed = service.push(fdbqueue_db, pq, value)
    popped = service.pop_min(fdbqueue_db, pq)
    assert popped.value == value == pushed.value
    assert type(popped.value) is type(value)


def test_tuples_come_back_as_lists(fdbqueue_db, pq):
    assert service.push(fdbqueue_db, pq, (1, 2, 3)).value == [1, 2, 3]  # (1, 2, 3) is not a pair
    service.push_many(fdbqueue_db, pq, [((1, 2), 0)])  # a tuple value inside a pair
    assert values(service.pop_many(fdbqueue_db, pq, 5)) == [[1, 2, 3], [1, 2]]


def test_bytes_values(fdbqueue_db, pq):
    raw = bytes(range(256)) * 3
    assert service.push(fdbqueue_db, pq, raw).value == raw
    service.push(fdbqueue_db, pq, bytearray(b"\x00\x01"))
    service.push(fdbqueue_db, pq, memoryview(b"mv"))
    service.push(fdbqueue_db, pq, "text", codec="json")
    got = values(service.pop_many(fdbqueue_db, pq, 10))
    assert got == [raw, b"\x00\x01", b"mv", "text"]
    assert all(type(v) is bytes for v in got[:3])


@pytest.mark.parametrize("value", [{1, 2}, object(), float("nan"), float("inf"), {"a": b"bytes"}])
def test_values_json_cannot_encode(fdbqueue_db, pq, value):
    with pytest.raises(exceptions.InvalidValue) as caught:
        service.push(fdbqueue_db, pq, value)
    assert isinstance(caught.value, exceptions.InvalidArgument)
    assert caught.value.code == "invalid_value"
    assert service.size(fdbqueue_db, pq) == 0


def _nested(depth):
    value = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", ["\ud800", {"k": "x\udfff"}, _nested(257), _nested(960), _nested(5000)])
def test_values_that_could_not_be_read_back_are_refused(fdbqueue_db, pq, value):
    """Lone surrogates and very deep nesting: refused up front, so no item can block the queue."""
    with pytest.raises(exceptions.InvalidValue):
        service.push(fdbqueue_db, pq, value)
    assert service.size(fdbqueue_db, pq) == 0


def test_values_nested_to_the_limit_round_trip(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, _nested(256))
    assert service.pop_min(fdbqueue_db, pq).value == _nested(256)


def test_pluggable_codec(fdbqueue_db, pq):
    class UpperCodec(codecs.Codec):
        name = "test-upper"

        def encode(self, value):
            return str(value).upper().encode()

        def decode(self, data):
            return data.decode() + "!"

    codec = UpperCodec()
    assert service.push(fdbqueue_db, pq, "hi", codec=codec).value == "HI!"
    service.push(fdbqueue_db, pq, "there", codec="test-upper")  # by name once registered
    service.push(fdbqueue_db, pq, "json")
    assert values(service.pop_many(fdbqueue_db, pq, 3)) == ["HI!", "THERE!", "json"]
    with pytest.raises(exceptions.InvalidArgument):
        service.push(fdbqueue_db, pq, "x", codec="no-such-codec")
    with pytest.raises(exceptions.InvalidArgument):
        service.push(fdbqueue_db, pq, "x", codec=42)
    with pytest.raises(exceptions.InvalidValue):
        service.push(fdbqueue_db, pq, "not bytes", codec="bytes")


def test_largest_value_fits_and_one_byte_more_is_refused_before_writing(fdbqueue_db, pq):
    largest = b"\x00" * service.MAX_VALUE_BYTES
    assert service.push(fdbqueue_db, pq, largest).value == largest
    before = dump(fdbqueue_db)
    with pytest.raises(exceptions.ValueTooLarge) as caught:
        service.push(fdbqueue_db, pq, largest + b"x")
    assert caught.value.code == "value_too_large"
    assert "100,000" in caught.value.message and caught.value.context["size"] == 100_001
    with pytest.raises(exceptions.ValueTooLarge):
        service.push(fdbqueue_db, pq, "é" * 50_001)  # 100,002 bytes of UTF-8 JSON
    # One bad value in a batch: nothing of the batch is written.
    with pytest.raises(exceptions.ValueTooLarge):
        service.push_many(fdbqueue_db, pq, ["ok", "fine", b"y" * 100_001, "never"])
    assert dump(fdbqueue_db) == before
    assert service.size(fdbqueue_db, pq) == 1


# --- ids -------------------------------------------------------------------------------------------


def test_ids_are_unique_stable_and_opaque(fdbqueue_db, pq):
    pushed = service.push_many(fdbqueue_db, pq, [(i, i % 2) for i in range(20)])
    ids = [item.id for item in pushed]
    assert len(set(ids)) == 20 and all(URL_SAFE.fullmatch(i) for i in ids)
    browsed = service.browse(fdbqueue_db, pq, limit=20).items
    assert sorted(item.id for item in browsed) == sorted(ids)
    assert {item.id: item for item in pushed} == {item.id: item for item in drain(fdbqueue_db, pq)}


@pytest.mark.parametrize("bad", ["", "nope", "!!", "AAAA", 123, None])
def test_get_item_rejects_bad_ids(fdbqueue_db, pq, bad):
    with pytest.raises(exceptions.InvalidArgument):
        service.get_item(fdbqueue_db, pq, bad)


def test_non_canonical_tokens_are_refused(fdbqueue_db, pq):
    item = service.push(fdbqueue_db, pq, "x")
    service.push(fdbqueue_db, pq, "y")
    cursor = service.browse(fdbqueue_db, pq, limit=1).next_cursor
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    padded = base64.urlsafe_b64encode(raw).decode()
    if padded != cursor:
        with pytest.raises(exceptions.InvalidCursor):
            service.browse(fdbqueue_db, pq, cursor=padded)
    with pytest.raises(exceptions.InvalidCursor):
        service.browse(fdbqueue_db, pq, cursor=item.id)


# --- browse ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["min", "max"])
def test_browse_pages_match_pop_order_and_remove_nothing(fdbqueue_db, pq, end):
    pushes = [(f"v{i}", [3, 1, 3, 2, 1, 3, 2][i % 7]) for i in range(17)]
    service.push_many(fdbqueue_db, pq, pushes)
    seen, cursor = [], None
    for _ in range(10):
        page = service.browse(fdbqueue_db, pq, end=end, cursor=cursor, limit=4)
        seen.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(seen) == 17
    assert service.size(fdbqueue_db, pq) == 17
    assert seen == drain(fdbqueue_db, pq, end)


def test_browse_cursor_stays_valid_when_its_item_is_popped(fdbqueue_db, pq):
    service.push_many(fdbqueue_db, pq, [("a", 1), ("b", 1), ("c", 2), ("d", 2)])
    page = service.browse(fdbqueue_db, pq, end="max", limit=1)
    assert values(page.items) == ["c"]
    assert service.pop_max(fdbqueue_db, pq).value == "c"
    rest = service.browse(fdbqueue_db, pq, end="max", cursor=page.next_cursor)
    assert values(rest.items) == ["d", "a", "b"] and rest.next_cursor is None


def test_browse_cursor_belongs_to_its_end(fdbqueue_db, pq):
    service.push_many(fdbqueue_db, pq, ["a", "b", "c"])
    cursor = service.browse(fdbqueue_db, pq, end="min", limit=1).next_cursor
    with pytest.raises(exceptions.InvalidCursor) as caught:
        service.browse(fdbqueue_db, pq, end="max", cursor=cursor)
    assert "'min'" in caught.value.message
    service.create_queue(fdbqueue_db, "zz")
    list_cursor = service.list_queues(fdbqueue_db, limit=1).next_cursor
    for bad in ["", "%%", "AAAA", list_cursor, "x" * 5000, 5]:
        with pytest.raises(exceptions.InvalidCursor):
            service.browse(fdbqueue_db, pq, cursor=bad)


@pytest.mark.parametrize("limit", [0, 1001, "3", None, 1.0])
def test_browse_rejects_bad_limits(fdbqueue_db, pq, limit):
    with pytest.raises(exceptions.InvalidArgument):
        service.browse(fdbqueue_db, pq, limit=limit)


# --- batches ---------------------------------------------------------------------------------------


def test_push_many_accepts_pairs_and_bare_values(fdbqueue_db, pq):
    pushed = service.push_many(fdbqueue_db, pq, iter(["a", ("b", 2), ["c", 3], ("d", -1)]))
    assert [(i.value, i.priority) for i in pushed] == [("a", 0), ("b", 2), (["c", 3], 0), ("d", -1)]
    assert all(isinstance(i, service.Item) for i in pushed)
    assert values(drain(fdbqueue_db, pq)) == ["d", "a", ["c", 3], "b"]
    assert service.push_many(fdbqueue_db, pq, []) == []
    with pytest.raises(exceptions.InvalidArgument):
        service.push_many(fdbqueue_db, pq, "abc")


def test_push_many_uses_one_transaction_when_it_fits(fdbqueue_db, pq):
    counting = CountingDatabase(fdbqueue_db)
    pushed = service.push_many(counting, pq, [(i, i % 4) for i in range(1000)])
    assert counting.transactions == 1
    assert len(pushed) == 1000 and service.size(fdbqueue_db, pq) == 1000
    assert values(service.pop_many(fdbqueue_db, pq, 1000)) == sorted(range(1000), key=lambda i: (i % 4, i))


def test_push_many_splits_by_bytes_and_keeps_order(fdbqueue_db, pq):
    counting = CountingDatabase(fdbqueue_db)
    big = [bytes([i]) * 90_000 for i in range(25)]
    pushed = service.push_many(counting, pq, big)
    longest_keys = QueueKeys(root_subspace(), b"\x00" * service_catalog.QUEUE_ID_BYTES)
    per_transaction = service_items.BATCH_BYTES // service_items.prepare(big[0], 0, None).cost(longest_keys)
    assert counting.transactions == -(-25 // per_transaction) == 3
    assert [p.value for p in pushed] == big
    counting = CountingDatabase(fdbqueue_db)
    assert values(service.pop_many(counting, pq, 100)) == big
    assert counting.transactions == 3  # pops are also capped near 1 MB per transaction


def test_push_many_splits_by_count(fdbqueue_db, pq, monkeypatch):
    monkeypatch.setattr(service_items, "PUSH_BATCH_ITEMS", 3)
    counting = CountingDatabase(fdbqueue_db)
    pushed = service.push_many(counting, pq, [(i, 1) for i in range(10)])
    assert counting.transactions == 4
    ids = [p.id for p in pushed]
    assert [i.id for i in drain(fdbqueue_db, pq)] == ids  # push order holds across transactions


def test_pop_many_in_batches(fdbqueue_db, pq, monkeypatch):
    service.push_many(fdbqueue_db, pq, [(i, i % 3) for i in range(10)])
    monkeypatch.setattr(service_items, "POP_BATCH_ITEMS", 4)
    counting = CountingDatabase(fdbqueue_db)
    got = service.pop_many(counting, pq, 7, end="max")
    assert counting.transactions == 2
    assert values(got) == [2, 5, 8, 1, 4, 7, 0]
    counting = CountingDatabase(fdbqueue_db)
    assert values(service.pop_many(counting, pq, 50)) == [3, 6, 9]
    assert counting.transactions == 1  # ran dry: no extra round trip
    info = service.get_queue(fdbqueue_db, pq)
    assert (info.size, info.popped) == (0, 10)


@pytest.mark.parametrize("n", [0, -1, "2", 1.0, None, True])
def test_pop_many_rejects_bad_counts(fdbqueue_db, pq, n):
    with pytest.raises(exceptions.InvalidArgument):
        service.pop_many(fdbqueue_db, pq, n)


# --- atomic composition in one transaction -----------------------------------------------------------


def test_push_to_two_queues_and_own_key_commit_together(fdbqueue_db, pq, fifo):
    own_key = root_subspace().pack(("my-app", "order", 17))  # under ROOT: cleaned up with it

    @transactional
    def hand_over(tr):
        a = service.push(tr, pq, {"order": 17}, priority=5)
        b = service.enqueue(tr, fifo, {"order": 17})
        tr[own_key] = b"queued"
        return a, b

    a, b = hand_over(fdbqueue_db)
    assert isinstance(a, service.PendingItem) and a.committed
    assert fdbqueue_db[own_key] == b"queued"
    assert service.pop_max(fdbqueue_db, pq) == a.result()
    assert service.dequeue(fdbqueue_db, fifo).id == b.id


def test_aborted_transaction_leaves_nothing(fdbqueue_db, pq, fifo):
    service.push(fdbqueue_db, pq, "existing", 1)
    before = dump(fdbqueue_db)
    own_key = root_subspace().pack(("my-app", "order", 18))

    class Abort(Exception):
        pass

    @transactional
    def hand_over(tr):
        service.pop_min(tr, pq)  # pops first: a read reaching this transaction's pushes is 1036
        service.push(tr, pq, "a", 2)
        service.enqueue(tr, fifo, "b")
        tr[own_key] = b"queued"
        raise Abort

    with pytest.raises(Abort):
        hand_over(fdbqueue_db)
    assert dump(fdbqueue_db) == before
    assert fdbqueue_db[own_key] == None  # noqa: E711  (a missing value is absent, not falsy)

    tr = fdbqueue_db.create_transaction()
    service.pop_max(tr, pq)
    pending = service.push(tr, pq, "never committed", 9)
    tr.reset()  # abandon
    assert dump(fdbqueue_db) == before
    with pytest.raises(exceptions.ItemNotCommitted):
        pending.result()
    assert not pending.committed


def test_reading_a_queue_after_pushing_to_it_in_the_same_transaction_is_1036(fdbqueue_db, pq):
    """FoundationDB cannot read where this transaction's versionstamped keys will land."""
    service.push(fdbqueue_db, pq, "old", 1)
    tr = fdbqueue_db.create_transaction()
    service.push(tr, pq, "new", 5)
    assert service.peek_min(tr, pq).value == "old"  # stops before the pushed item's range
    with pytest.raises(FDBError) as caught:
        service.pop_max(tr, pq)  # would have to read through it
    assert caught.value.code == 1036


def test_pending_item_resolves_after_commit(fdbqueue_db, pq):
    tr = fdbqueue_db.create_transaction()
    first = service.push(tr, pq, "one", 3)
    second = service.push(tr, pq, "two", 3)
    many = service.push_many(tr, pq, [("three", 3), ("four", 3)])
    assert isinstance(first, service.PendingItem) and (first.priority, first.value) == (3, "one")
    assert first.enqueued_at.tzinfo is not None
    assert not first.committed
    with pytest.raises(exceptions.ItemNotCommitted) as caught:
        first.id
    assert caught.value.code == "item_not_committed" and "commit" in caught.value.message
    assert "pending" in repr(first)
    tr.commit().wait()
    assert first.committed and URL_SAFE.fullmatch(first.id)
    pending = [first, second, *many]
    popped = drain(fdbqueue_db, pq)
    # one transaction, four pushes: user versions keep them in push order, with distinct ids
    assert [p.id for p in pending] == [i.id for i in popped]
    assert values(popped) == ["one", "two", "three", "four"]
    assert [p.result() for p in pending] == popped


def test_pops_in_a_transaction_see_each_other(fdbqueue_db, pq):
    service.push_many(fdbqueue_db, pq, [("a", 1), ("b", 2), ("c", 2), ("d", 3)])

    @transactional
    def take_three(tr):
        return [service.pop_max(tr, pq), service.pop_max(tr, pq), service.pop_min(tr, pq), service.size(tr, pq)]

    d, b, a, size_inside = take_three(fdbqueue_db)
    assert (d.value, b.value, a.value, size_inside) == ("d", "b", "a", 1)
    assert values(drain(fdbqueue_db, pq)) == ["c"]


def test_create_and_use_in_one_transaction(fdbqueue_db):
    @transactional
    def setup(tr):
        service.create_queue(tr, "fresh", kind="priority")
        return service.push(tr, "fresh", "hello", 2)

    pending = setup(fdbqueue_db)
    assert service.pop_min(fdbqueue_db, "fresh").id == pending.id


# --- conflicts: what may and may not collide ---------------------------------------------------------


def _commit(tr):
    tr.commit().wait()


def _conflicts(tr) -> bool:
    try:
        tr.commit().wait()
    except FDBError as error:
        assert error.code == 1020
        return True
    return False


def test_concurrent_pushes_never_conflict(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "seed", 1)
    trs = [fdbqueue_db.create_transaction() for _ in range(4)]
    for i, tr in enumerate(trs):  # all four push before any commits
        service.push(tr, pq, i, 1)
    for tr in trs:
        assert not _conflicts(tr)
    assert service.size(fdbqueue_db, pq) == 5


def test_pops_do_not_conflict_with_pushes_after_them(fdbqueue_db, pq):
    service.push_many(fdbqueue_db, pq, [("low", 1), ("high", 5)])
    # Some other commit, so the pushes below read a version later than the items' commit.
    # (FoundationDB reserves for a versionstamped key everything from (read version, 0) up:
    # a push whose read version *is* the popped item's commit version does conflict.)
    service.create_queue(fdbqueue_db, "unrelated")
    pop_min_tr = fdbqueue_db.create_transaction()
    pop_max_tr = fdbqueue_db.create_transaction()
    assert service.pop_min(pop_min_tr, pq).value == "low"
    assert service.pop_max(pop_max_tr, pq).value == "high"
    service.push(fdbqueue_db, pq, "another high", 5)  # same priority as the max, pushed later
    service.push(fdbqueue_db, pq, "another low", 1)
    assert not _conflicts(pop_min_tr)
    assert not _conflicts(pop_max_tr)
    assert values(drain(fdbqueue_db, pq)) == ["another low", "another high"]


def test_pop_max_conflicts_with_a_push_above_it(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "five", 5)
    tr = fdbqueue_db.create_transaction()
    assert service.pop_max(tr, pq).value == "five"
    service.push(fdbqueue_db, pq, "six", 6)
    assert _conflicts(tr)
    assert service.pop_max(fdbqueue_db, pq).value == "six"


def test_pop_min_conflicts_with_a_push_below_it(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "five", 5)
    tr = fdbqueue_db.create_transaction()
    assert service.pop_min(tr, pq).value == "five"
    service.push(fdbqueue_db, pq, "four", 4)
    assert _conflicts(tr)


def test_two_pops_of_one_item_conflict(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "only", 1)
    first, second = fdbqueue_db.create_transaction(), fdbqueue_db.create_transaction()
    assert service.pop_min(first, pq).value == "only"
    assert service.pop_max(second, pq).value == "only"
    _commit(first)
    assert _conflicts(second)


def test_empty_answer_is_serializable(fdbqueue_db, pq):
    tr = fdbqueue_db.create_transaction()
    assert service.pop_max(tr, pq) is None
    tr[root_subspace().pack(("my-app", "flag"))] = b"saw empty"  # a write: the commit is checked
    service.push(fdbqueue_db, pq, "late", 1)
    assert _conflicts(tr)


def test_push_racing_a_delete_retries_and_sees_the_queue_gone(fdbqueue_db, pq):
    tr = fdbqueue_db.create_transaction()
    service.push(tr, pq, "racing", 1)
    service.delete_queue(fdbqueue_db, pq)
    assert _conflicts(tr)
    assert without_deletion_markers(dump(fdbqueue_db))[0] == []


def test_retried_transaction_restarts_user_versions(settings, tmp_path):
    """Fault injection: commits that fail force retries; pushes still land once, in order."""
    from django_fdbqueue import connection

    settings.FDBQUEUE = {
        "ENGINE": "embedded",
        "PATH": str(tmp_path / "faults.sqlite3"),
        "ROOT": ("faulty",),
        "TIMEOUT": None,
    }
    connection.reset_database()
    db = connection.get_database()
    try:
        service.create_queue(db, "q", kind="priority")
        db.faults.configure(not_committed=0.3, unknown_not_applied=0.1, seed=7)

        @transactional
        def push_three(tr, base):
            return [service.push(tr, "q", base + i, 1) for i in range(3)]

        pending = [p for base in range(0, 30, 3) for p in push_three(db, base)]
        assert sum(db.faults.injected.values()) > 0
        db.faults.disable()
        popped = service.pop_many(db, "q", 100)
        assert values(popped) == list(range(30))
        assert [p.id for p in pending] == [i.id for i in popped]
    finally:
        connection.reset_database()


def test_one_transaction_holds_at_most_65536_pushes(fdbqueue_db, pq):
    tr = fdbqueue_db.create_transaction()
    with pytest.raises(exceptions.InvalidArgument) as caught:
        service.push_many(tr, pq, range(65_537))
    assert "65536" in caught.value.message
    tr.reset()
    assert service.size(fdbqueue_db, pq) == 0


# --- commit_unknown_result, attempts and batch sizing (review findings) ---------------------------


@pytest.fixture
def embedded_app_db(settings, tmp_path):
    """The app's handle on a fresh embedded store, for fault injection (an embedded feature)."""
    from django_fdbqueue import connection

    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(tmp_path / "faults.sqlite3"), "TIMEOUT": None}
    connection.reset_database()
    yield connection.get_database()
    connection.reset_database()


def test_create_whose_commit_applied_but_reported_1021_succeeds(embedded_app_db):
    """The retry finds the entry with the id this call chose: its own commit, so success."""
    embedded_app_db.faults.fail_next("unknown_applied")
    info = service.create_queue(embedded_app_db, "jobs", kind="priority")
    assert info.name == "jobs" and info.kind == "priority"
    assert embedded_app_db.faults.injected["unknown_applied"] == 1
    assert service.get_queue(embedded_app_db, "jobs").kind == "priority"
    with pytest.raises(exceptions.QueueAlreadyExists):  # a second call is still refused
        service.create_queue(embedded_app_db, "jobs")


def test_create_whose_commit_did_not_apply_and_reported_1021_succeeds(embedded_app_db):
    embedded_app_db.faults.fail_next("unknown_not_applied", "not_committed")
    service.create_queue(embedded_app_db, "jobs")
    assert service.queue_exists(embedded_app_db, "jobs")


def test_delete_whose_commit_applied_but_reported_1021_succeeds(embedded_app_db):
    """The retry finds this call's deletion marker, so it reports success, not QueueNotFound."""
    service.create_queue(embedded_app_db, "jobs")
    service.push(embedded_app_db, "jobs", "x")
    embedded_app_db.faults.fail_next("unknown_applied")
    service.delete_queue(embedded_app_db, "jobs")
    assert embedded_app_db.faults.injected["unknown_applied"] == 1
    assert not service.queue_exists(embedded_app_db, "jobs")
    with pytest.raises(exceptions.QueueNotFound):  # another call still learns there is none
        service.delete_queue(embedded_app_db, "jobs")


def test_deletion_markers_older_than_an_hour_are_forgotten(fdbqueue_db, monkeypatch):
    service.create_queue(fdbqueue_db, "old")
    service.delete_queue(fdbqueue_db, "old")
    markers = root_subspace()[DELETIONS].range()
    assert len(fdbqueue_db.get_range(markers.start, markers.stop)) == 1
    later = time.time_ns() + 3601 * 10**9
    monkeypatch.setattr(time, "time_ns", lambda: later)
    service.create_queue(fdbqueue_db, "new")
    service.delete_queue(fdbqueue_db, "new")
    assert len(fdbqueue_db.get_range(markers.start, markers.stop)) == 1  # only the new one


def test_user_versions_restart_on_every_attempt(fdbqueue_db, pq):
    """A caller's transaction retried (on_error) with the same read version: numbering restarts,
    so a big batch fits every attempt instead of running past 65,536 user versions."""
    values_ = list(range(22_000))
    tr = fdbqueue_db.create_transaction()
    # 66,000 pushes of Python work in one transaction: more than the app's 5 s on a busy machine.
    tr.options.set_timeout(120_000)
    for _attempt in range(2):
        service.push_many(tr, pq, values_)
        tr.on_error(make_error(1020)).wait()  # what a conflict would do: reset, same store state
    pending = service.push_many(tr, pq, values_)
    tr.commit().wait()
    assert service.size(fdbqueue_db, pq) == 22_000
    assert [p.result().value for p in pending[:3]] == [0, 1, 2]
    assert len({p.id for p in pending}) == 22_000
    assert [item.value for item in service.pop_many(fdbqueue_db, pq, 5)] == [0, 1, 2, 3, 4]


def test_user_versions_restart_after_a_failed_commit_with_the_same_read_version(embedded_app_db):
    service.create_queue(embedded_app_db, "jobs")
    embedded_app_db.faults.fail_next("not_committed", "not_committed")
    tr = embedded_app_db.create_transaction()
    while True:
        service.push_many(tr, "jobs", range(22_000))
        try:
            tr.commit().wait()
            break
        except FDBError as error:
            tr.on_error(error).wait()
    assert embedded_app_db.faults.injected["not_committed"] == 2
    assert service.size(embedded_app_db, "jobs") == 22_000


def test_push_many_sizes_batches_from_the_real_key_length(fdbqueue_db, settings, monkeypatch):
    """A 1 KB ROOT makes every key about 1 KB longer: batches shrink to stay under 10 MB."""
    from django_fdbqueue import connection

    long_root = ("r" * 1000,) + tuple(settings.FDBQUEUE.get("ROOT", ("fdbqueue",)))
    settings.FDBQUEUE = {**settings.FDBQUEUE, "ROOT": long_root}
    db = connection.get_database()
    service.create_queue(db, "wide")
    counting = CountingDatabase(db)
    service.push_many(counting, "wide", range(3_000))
    assert counting.transactions > 1
    assert service.size(db, "wide") == 3_000
    assert [item.value for item in service.pop_many(db, "wide", 3)] == [0, 1, 2]


# --- the catalog entry cache ------------------------------------------------------------------------


def test_a_cached_entry_saves_the_catalog_read(fdbqueue_db, pq, monkeypatch):
    service.push(fdbqueue_db, pq, "warm")  # reads the entry once, under the current metadata version
    reads = []
    original = service_catalog.read_entry
    monkeypatch.setattr(service_catalog, "read_entry", lambda *a: reads.append(a) or original(*a))
    service.push(fdbqueue_db, pq, "cached")
    assert service.pop(fdbqueue_db, pq).value == "warm"
    assert reads == []


def test_create_and_delete_make_cached_entries_stale(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "warm")
    service.delete_queue(fdbqueue_db, pq)
    with pytest.raises(exceptions.QueueNotFound):
        service.push(fdbqueue_db, pq, "into a deleted queue")
    service.create_queue(fdbqueue_db, pq, kind="fifo")
    assert service.get_queue(fdbqueue_db, pq).kind == "fifo"
    service.enqueue(fdbqueue_db, pq, "fresh")
    assert [item.value for item in service.pop_many(fdbqueue_db, pq, 5)] == ["fresh"]


def test_an_operation_using_a_cached_entry_still_conflicts_with_a_racing_delete(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "warm")
    tr = fdbqueue_db.create_transaction()
    service.push(tr, pq, "racing")  # the entry comes from the cache: no read of the catalog key
    service.delete_queue(fdbqueue_db, pq)
    assert _conflicts(tr)


def test_create_then_push_in_one_transaction_reads_the_entry_it_wrote(fdbqueue_db):
    """The attempt that changed the catalog cannot read the metadata version it wrote (1036):
    it reads entries directly instead."""
    tr = fdbqueue_db.create_transaction()
    service.create_queue(tr, "born", kind="priority")
    service.push(tr, "born", "first", 3)
    tr.commit().wait()
    assert service.pop(fdbqueue_db, "born").value == "first"


# --- issue 17: a wait ends when its queue is deleted ------------------------------------------------

# A waiter that sleeps out its whole wait fails the bound below by far.
LONGEST_WAIT = service.MAX_WAIT_SECONDS
PROMPTLY = 10.0


@pytest.fixture
def asleep(monkeypatch) -> threading.Event:
    """Set once a waiting pop or claim sleeps on its watches (so a deletion now must wake it)."""

    event = threading.Event()
    real = runtime.wait_on

    def wait_on(watch, seconds):
        event.set()
        return real(watch, seconds)

    monkeypatch.setattr(runtime, "wait_on", wait_on)
    return event


WAITERS = {
    "pop": lambda db, name: service.pop(db, name, "max", wait=LONGEST_WAIT),
    "claim": lambda db, name: service.claim(db, name, wait=LONGEST_WAIT),
    "high-contention pop": lambda db, name: service.pop(db, name, mode="high-contention", wait=LONGEST_WAIT),
}


@pytest.mark.parametrize("waiter", list(WAITERS))
@pytest.mark.parametrize("used", [False, True], ids=["never-pushed", "pushed-before"])
def test_a_waiter_gets_queue_not_found_as_soon_as_its_queue_is_deleted(fdbqueue_db, pq, asleep, waiter, used):
    """A queue that never had a push has no wake-up key for the deletion to change: the waiter
    must still wake at once (it watches the catalog entry too), not sleep out its wait."""
    if used:
        service.push(fdbqueue_db, pq, "gone")
        service.pop(fdbqueue_db, pq)
    box: dict = {}

    def run():
        try:
            box["result"] = WAITERS[waiter](fdbqueue_db, pq)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert asleep.wait(PROMPTLY), "the waiter never went to sleep"
        deleted = time.monotonic()
        service.delete_queue(fdbqueue_db, pq)
        thread.join(PROMPTLY)
        assert not thread.is_alive(), "the waiter slept on after its queue was deleted"
        assert time.monotonic() - deleted < PROMPTLY
        assert isinstance(box.get("error"), exceptions.QueueNotFound), box
    finally:
        thread.join(LONGEST_WAIT + PROMPTLY)  # a failed run still stops its thread


# --- issue 17: a lease that is gone, one name for one thing ------------------------------------------


def test_both_lease_errors_are_lease_gone_with_a_reason(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "a")
    lease = service.claim(fdbqueue_db, pq, lease=0.05)
    deadline = time.monotonic() + PROMPTLY
    while dt.datetime.now(dt.timezone.utc) <= lease.lease_expires_at:  # polled, bounded
        assert time.monotonic() < deadline
        threading.Event().wait(0.01)
    for call in (service.ack, service.release, lambda db, r: service.extend(db, r, 30)):
        with pytest.raises(exceptions.LeaseGone) as gone:
            call(fdbqueue_db, lease.receipt)
        assert isinstance(gone.value, exceptions.LeaseExpired)
        assert (gone.value.code, gone.value.reason) == ("lease_expired", "expired")
    again = service.claim(fdbqueue_db, pq)  # the expired lease's item, claimed anew
    for call in (service.ack, service.release, lambda db, r: service.extend(db, r, 30)):
        with pytest.raises(exceptions.LeaseGone) as gone:
            call(fdbqueue_db, lease.receipt)
        assert isinstance(gone.value, exceptions.LeaseNotFound)
        assert (gone.value.code, gone.value.reason) == ("lease_not_found", "not_found")
    service.ack(fdbqueue_db, again.receipt)


def test_extend_takes_lease_like_claim_and_still_seconds(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "a")
    lease = service.claim(fdbqueue_db, pq, lease=5)
    now = dt.datetime.now(dt.timezone.utc)
    longer = service.extend(fdbqueue_db, lease.receipt, lease=600)
    assert longer.lease_expires_at - now > dt.timedelta(seconds=500)
    with pytest.warns(DeprecationWarning, match="lease="):
        shorter = service.extend(fdbqueue_db, lease.receipt, seconds=60)
    assert dt.timedelta(seconds=30) < shorter.lease_expires_at - now < dt.timedelta(seconds=100)
    assert service.extend(fdbqueue_db, lease.receipt, 120).receipt == lease.receipt  # positional, as before
    with pytest.raises(exceptions.InvalidArgument, match="not both"):
        service.extend(fdbqueue_db, lease.receipt, lease=60, seconds=60)
    with pytest.raises(exceptions.InvalidArgument, match="lease"):
        service.extend(fdbqueue_db, lease.receipt)
    with pytest.raises(exceptions.InvalidArgument, match="lease"):
        service.extend(fdbqueue_db, lease.receipt, lease=0)


def test_a_lease_ends_at_lease_expires_at_and_the_old_name_still_reads(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "a")
    lease = service.claim(fdbqueue_db, pq, lease=60)
    assert [f.name for f in dataclasses.fields(lease)] == ["item", "receipt", "lease_expires_at"]
    with pytest.warns(DeprecationWarning, match="lease_expires_at"):
        assert lease.expires_at == lease.lease_expires_at


def test_a_duplicate_push_returns_the_stored_item_not_the_value_sent(fdbqueue_db, pq):
    first = service.push(fdbqueue_db, pq, {"order": 7}, 3, dedup_key="order-7")
    again = service.push(fdbqueue_db, pq, {"order": 8}, 3, dedup_key="order-7")
    assert again.duplicate and again == dataclasses.replace(first, duplicate=True)
    assert again.value == {"order": 7}

    lease = service.claim(fdbqueue_db, pq)  # leased: attempts and value as stored
    leased = service.push(fdbqueue_db, pq, "other", 3, dedup_key="order-7")
    assert (leased.value, leased.attempts, leased.duplicate) == ({"order": 7}, 1, True)
    service.ack(fdbqueue_db, lease.receipt)
    consumed = service.push(fdbqueue_db, pq, "other", 3, dedup_key="order-7")
    assert (consumed.id, consumed.value, consumed.duplicate) == (first.id, None, True)  # no value left
    assert service.size(fdbqueue_db, pq) == 0


def test_a_duplicate_of_a_delayed_or_dead_item_shows_it_as_stored(fdbqueue_db, pq):
    later = service.push(fdbqueue_db, pq, "later", delay=600, dedup_key="later")
    assert service.push(fdbqueue_db, pq, "x", dedup_key="later").value == "later"
    service.set_max_attempts(fdbqueue_db, pq, 1)
    service.push(fdbqueue_db, pq, "doomed", dedup_key="doomed")
    assert service.release(fdbqueue_db, service.claim(fdbqueue_db, pq).receipt) == "dead"
    dead = service.push(fdbqueue_db, pq, "x", dedup_key="doomed")
    assert (dead.value, dead.attempts, dead.duplicate) == ("doomed", 1, True)
    assert service.get_item(fdbqueue_db, pq, later.id).value == "later"


def test_a_key_pushed_twice_in_one_transaction_says_the_second_is_a_duplicate(fdbqueue_db, pq):
    @transactional
    def twice(tr):
        return service.push(tr, pq, "a", dedup_key="k"), service.push(tr, pq, "b", dedup_key="k")

    first, second = twice(fdbqueue_db)
    assert not first.result().duplicate
    assert second.result() == dataclasses.replace(first.result(), duplicate=True)
    assert (second.value, second.priority) == ("a", 0)


@pytest.mark.parametrize("call", [service.pop, service.claim], ids=["pop", "claim"])
def test_one_wait_cap_for_every_face(fdbqueue_db, pq, call):
    from django_fdbqueue.api import serializers

    assert service.MAX_WAIT_SECONDS == serializers.MAX_WAIT_SECONDS == 20
    with pytest.raises(exceptions.InvalidArgument, match="wait"):
        call(fdbqueue_db, pq, wait=20.5)
    service.push(fdbqueue_db, pq, "there")
    assert call(fdbqueue_db, pq, wait=20) is not None  # the cap itself is allowed


def test_a_duplicate_after_a_push_in_the_same_transaction_still_reads_the_stored_item(fdbqueue_db, pq):
    """The stored item's reads stay clear of where this transaction's own pushes will land (1036)."""
    first = service.push(fdbqueue_db, pq, "stored", 5, dedup_key="k")

    @transactional
    def push_then_repeat(tr):
        service.push(tr, pq, "new", 5)
        service.push(tr, pq, "delayed", 5, delay=600)
        return service.push(tr, pq, "sent", 5, dedup_key="k")

    again = push_then_repeat(fdbqueue_db).result()
    assert (again.id, again.value, again.duplicate) == (first.id, "stored", True)
