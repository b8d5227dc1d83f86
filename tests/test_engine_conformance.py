"""Engine conformance: the FoundationDB behaviours the app relies on, asserted on every engine.

Each test runs on the embedded engine, and again on a real cluster when
FDBQUEUE_TEST_CLUSTER_FILE is set (see tests/conftest.py), so the embedded engine is held to
exactly what FoundationDB 7.3 does. Every key lives under the per-test ``keyspace`` subspace.

Conflict scenarios are interleaved by hand: transaction 1 reads (and the read is forced, so its
read version and read conflict range exist), transaction 2 writes and commits, then transaction 1
writes and commits and either commits or fails with 1020 (not_committed).
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from typing import Any, Callable

import pytest

from django_fdbqueue.fdbapi import FDBError, KeySelector, fdb, transactional

Versionstamp = fdb.tuple.Versionstamp

# Upper bound for every wait on another thread; generous for a loaded 2-core machine.
WAIT = 30.0

NOT_COMMITTED = 1020
COMMIT_UNKNOWN_RESULT = 1021
TRANSACTION_TOO_OLD = 1007
TRANSACTION_TOO_LARGE = 2101
KEY_TOO_LARGE = 2102
VALUE_TOO_LARGE = 2103

COMMITTED = "committed"


# --------------------------------------------------------------------------- helpers


def pairs(kvs: Any) -> list[tuple[bytes, bytes]]:
    """A range result as (key, value) tuples, through the tuple unpacking every KeyValue offers."""
    return [(bytes(k), bytes(v)) for k, v in kvs]


def le64(n: int) -> bytes:
    return struct.pack("<q", n)


def fill(db: Any, items: dict[bytes, bytes]) -> None:
    tr = db.create_transaction()
    for key, value in items.items():
        tr[key] = value
    tr.commit().wait()


def commit_outcome(tr: Any) -> Any:
    """Commit; return COMMITTED or the FDBError code."""
    try:
        tr.commit().wait()
    except FDBError as error:
        return error.code
    return COMMITTED


def interleave(
    db: Any,
    read: Callable[[Any], Any],
    concurrent_write: Callable[[Any], Any],
    marker: bytes,
) -> Any:
    """tr1 reads, tr2 writes and commits, tr1 writes `marker` and commits: tr1's outcome.

    tr1 takes its read version first: on a cluster a read that is never waited for gets it in
    the background, maybe after tr2's commit, and then sees tr2's write instead of conflicting.
    """
    tr1 = db.create_transaction()
    tr1.get_read_version().wait()
    read(tr1)
    tr2 = db.create_transaction()
    concurrent_write(tr2)
    tr2.commit().wait()
    tr1[marker] = b"tr1"
    return commit_outcome(tr1)


def expect_error(code: int, action: Callable[[], Any]) -> FDBError:
    """Run `action`; it must raise FDBError with `code` (wherever the engine surfaces it)."""
    with pytest.raises(FDBError) as info:
        action()
    assert info.value.code == code, f"expected FDBError {code}, got {info.value.code}: {info.value}"
    return info.value


def run_threads(*targets: Callable[[], None]) -> None:
    """Start one thread per target, join them with a deadline, and re-raise their failures."""
    errors: list[BaseException] = []

    def guard(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as error:  # reported in the main thread
                errors.append(error)

        return run

    threads = [threading.Thread(target=guard(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + WAIT * 2
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a worker thread did not finish in time"
    if errors:
        raise errors[0]


@pytest.fixture
def k(keyspace):
    """k("a") -> the key ("a",) inside this test's subspace."""
    return lambda *parts: keyspace.pack(parts)


# --------------------------------------------------------------------------- point reads and writes


def test_get_of_present_key_answers_present_and_equals_bytes(db, k):
    """tr[key] returns a value that answers present() and compares equal to the stored bytes."""
    db[k("a")] = b"apple"
    tr = db.create_transaction()
    value = tr[k("a")]
    assert value.present()
    assert value == b"apple"
    assert bytes(value) == b"apple"
    assert value != b"pear"
    assert value != None  # noqa: E711 - the binding's Value compares with None by value


def test_get_of_missing_key_is_absent_and_equals_none(db, k):
    """tr[missing] is not present() and compares equal to None (never raises KeyError)."""
    tr = db.create_transaction()
    value = tr[k("missing")]
    assert not value.present()
    assert value == None  # noqa: E711 - the documented presence test of the binding
    assert value != b""


def test_truthiness_of_missing_value_raises_type_error(db, k):
    """bool(tr[missing]) raises TypeError, as in the binding: presence must use present()/== None."""
    tr = db.create_transaction()
    value = tr[k("missing")]
    with pytest.raises(TypeError):
        bool(value)
    with pytest.raises(TypeError):
        if value:  # the bug the binding punishes: `if tr[key]:`
            pass


def test_empty_value_is_present_but_falsy(db, k):
    """An empty value is stored and present(); like bytes, it is falsy."""
    db[k("empty")] = b""
    tr = db.create_transaction()
    value = tr[k("empty")]
    assert value.present()
    assert value == b""
    assert not bool(value)


def test_get_method_matches_getitem(db, k):
    """tr.get(key) is tr[key]."""
    db[k("a")] = b"1"
    tr = db.create_transaction()
    assert tr.get(k("a")) == b"1"
    assert tr.get(k("b")) == None  # noqa: E711


def test_set_then_delete_key(db, k):
    """tr[key] = v stores v; del tr[key] removes the key."""
    tr = db.create_transaction()
    tr[k("a")] = b"1"
    tr.set(k("b"), b"2")
    tr.commit().wait()
    assert db[k("a")] == b"1"
    assert db[k("b")] == b"2"
    tr = db.create_transaction()
    del tr[k("a")]
    tr.clear(k("b"))
    tr.commit().wait()
    assert db[k("a")] is None
    assert db[k("b")] is None


def test_overwrite_replaces_value(db, k):
    """A later set of the same key replaces the value entirely."""
    db[k("a")] = b"long value"
    db[k("a")] = b"v2"
    assert db[k("a")] == b"v2"


def test_commit_wait_returns_none(db, k):
    """commit() returns a future whose wait() returns None once durable."""
    tr = db.create_transaction()
    tr[k("a")] = b"1"
    future = tr.commit()
    assert future.wait() is None


def test_database_shortcuts_get_set_delete(db, k):
    """db[key], db[key] = v, del db[key] each run as their own committed transaction."""
    db[k("a")] = b"1"
    assert db[k("a")] == b"1"
    assert db[k("missing")] is None
    del db[k("a")]
    assert db[k("a")] is None


def test_database_range_shortcuts(db, k):
    """db.get_range / db[b:e] / del db[b:e] / db.clear_range work like their transaction forms."""
    fill(db, {k("a"): b"1", k("b"): b"2", k("c"): b"3", k("d"): b"4"})
    assert pairs(db.get_range(k("a"), k("c"))) == [(k("a"), b"1"), (k("b"), b"2")]
    assert pairs(db[k("b") : k("d")]) == [(k("b"), b"2"), (k("c"), b"3")]
    del db[k("a") : k("b")]
    assert db[k("a")] is None
    db.clear_range(k("b"), k("c"))
    assert pairs(db.get_range(k("a"), k("z"))) == [(k("c"), b"3"), (k("d"), b"4")]


# --------------------------------------------------------------------------- clears


def test_clear_range_is_half_open(db, k):
    """clear_range(b, e) removes keys in [b, e): b and between, not e."""
    fill(db, {k("a"): b"1", k("b"): b"2", k("c"): b"3", k("d"): b"4"})
    tr = db.create_transaction()
    tr.clear_range(k("b"), k("d"))
    tr.commit().wait()
    assert pairs(db.get_range(k("a"), k("z"))) == [(k("a"), b"1"), (k("d"), b"4")]


def test_clear_range_startswith_clears_exactly_the_prefix(db, keyspace):
    """clear_range_startswith(p) removes every key starting with p and nothing else."""
    inner = keyspace["inner"]
    fill(db, {inner.pack(("x",)): b"1", inner.pack(("y",)): b"2", keyspace.pack(("outer",)): b"3"})
    tr = db.create_transaction()
    tr.clear_range_startswith(inner.key())
    tr.commit().wait()
    assert pairs(db.get_range(keyspace.range().start, keyspace.range().stop)) == [(keyspace.pack(("outer",)), b"3")]


def test_del_slice_clears_range(db, k):
    """del tr[b:e] is clear_range(b, e)."""
    fill(db, {k("a"): b"1", k("b"): b"2", k("c"): b"3"})
    tr = db.create_transaction()
    del tr[k("a") : k("c")]
    tr.commit().wait()
    assert pairs(db.get_range(k("a"), k("z"))) == [(k("c"), b"3")]


# --------------------------------------------------------------------------- range reads


def test_get_range_yields_keyvalues_in_key_order(db, k):
    """get_range yields KeyValue rows in key order, with .key/.value, unpacking as (key, value)."""
    fill(db, {k("c"): b"3", k("a"): b"1", k("b"): b"2"})
    tr = db.create_transaction()
    rows = list(tr.get_range(k("a"), k("z")))
    assert [row.key for row in rows] == [k("a"), k("b"), k("c")]
    assert [row.value for row in rows] == [b"1", b"2", b"3"]
    key, value = rows[0]
    assert (key, value) == (k("a"), b"1")
    assert [(key, value) for key, value in tr.get_range(k("a"), k("z"))] == [
        (k("a"), b"1"),
        (k("b"), b"2"),
        (k("c"), b"3"),
    ]


def test_get_range_is_half_open(db, k):
    """get_range(b, e) includes b and excludes e."""
    fill(db, {k("a"): b"1", k("b"): b"2", k("c"): b"3"})
    tr = db.create_transaction()
    assert pairs(tr.get_range(k("a"), k("c"))) == [(k("a"), b"1"), (k("b"), b"2")]
    assert pairs(tr.get_range(k("b"), k("b"))) == []


def test_get_range_limit_and_reverse(db, k):
    """limit caps the rows; reverse=True walks from the end; limit=0 means no limit."""
    fill(db, {k(c): c.encode() for c in "abcde"})
    tr = db.create_transaction()
    assert [kv.key for kv in tr.get_range(k("a"), k("z"), limit=2)] == [k("a"), k("b")]
    assert [kv.key for kv in tr.get_range(k("a"), k("z"), reverse=True)] == [
        k("e"),
        k("d"),
        k("c"),
        k("b"),
        k("a"),
    ]
    assert [kv.key for kv in tr.get_range(k("a"), k("z"), limit=2, reverse=True)] == [
        k("e"),
        k("d"),
    ]
    assert [kv.key for kv in tr.get_range(k("b"), k("e"), 0, True)] == [k("d"), k("c"), k("b")]
    assert len(list(tr.get_range(k("a"), k("z"), limit=0))) == 5


def test_get_range_of_empty_range_yields_nothing(db, k):
    """A range with no keys yields no rows."""
    tr = db.create_transaction()
    assert list(tr.get_range(k("a"), k("z"))) == []
    assert list(tr.get_range(k("a"), k("z"), limit=1, reverse=True)) == []


def test_get_range_accepts_key_selectors(db, k):
    """get_range takes KeySelectors as begin/end (plain keys mean first_greater_or_equal)."""
    fill(db, {k(c): c.encode() for c in "abcd"})
    tr = db.create_transaction()
    rows = tr.get_range(KeySelector.first_greater_than(k("a")), KeySelector.first_greater_or_equal(k("d")))
    assert [kv.key for kv in rows] == [k("b"), k("c")]


def test_get_range_startswith(db, keyspace):
    """get_range_startswith(p) yields exactly the keys starting with p, with limit/reverse."""
    inner = keyspace["inner"]
    fill(
        db,
        {
            inner.pack((1,)): b"1",
            inner.pack((2,)): b"2",
            inner.pack((3,)): b"3",
            keyspace.pack(("outer",)): b"x",
        },
    )
    tr = db.create_transaction()
    assert pairs(tr.get_range_startswith(inner.key())) == [
        (inner.pack((1,)), b"1"),
        (inner.pack((2,)), b"2"),
        (inner.pack((3,)), b"3"),
    ]
    assert [kv.value for kv in tr.get_range_startswith(inner.key(), limit=1, reverse=True)] == [b"3"]


def test_slice_reads_are_range_reads(db, k):
    """tr[b:e] is get_range(b, e); tr[b:e:-1] reads it in reverse, as in the binding."""
    fill(db, {k(c): c.encode() for c in "abc"})
    tr = db.create_transaction()
    assert pairs(tr[k("a") : k("c")]) == [(k("a"), b"a"), (k("b"), b"b")]
    assert [kv.key for kv in tr[k("a") : k("z") : -1]] == [k("c"), k("b"), k("a")]


def test_subspace_range_reads_the_tuple_prefix(db, keyspace):
    """Keys built with fdb.Subspace/fdb.tuple sort and range-read as tuples (byte-identical keys)."""
    queue = keyspace["q"]
    fill(db, {queue.pack((2, "b")): b"2b", queue.pack((-1, "a")): b"-1a", queue.pack((2, "a")): b"2a"})
    tr = db.create_transaction()
    r = queue.range()
    assert [queue.unpack(kv.key) for kv in tr.get_range(r.start, r.stop)] == [
        (-1, "a"),
        (2, "a"),
        (2, "b"),
    ]


# --------------------------------------------------------------------------- key selectors


def test_get_key_resolves_the_four_selector_forms(db, k):
    """get_key resolves first_greater_or_equal/than and last_less_than/or_equal as FDB defines."""
    fill(db, {k("a"): b"", k("c"): b"", k("e"): b""})
    tr = db.create_transaction()
    assert tr.get_key(KeySelector.first_greater_or_equal(k("c"))) == k("c")
    assert tr.get_key(KeySelector.first_greater_or_equal(k("b"))) == k("c")
    assert tr.get_key(KeySelector.first_greater_than(k("c"))) == k("e")
    assert tr.get_key(KeySelector.first_greater_than(k("b"))) == k("c")
    assert tr.get_key(KeySelector.last_less_than(k("c"))) == k("a")
    assert tr.get_key(KeySelector.last_less_than(k("d"))) == k("c")
    assert tr.get_key(KeySelector.last_less_or_equal(k("c"))) == k("c")
    assert tr.get_key(KeySelector.last_less_or_equal(k("d"))) == k("c")


def test_get_key_offsets_move_by_whole_keys(db, k):
    """selector + n / selector - n move n keys forward / backward."""
    fill(db, {k(c): b"" for c in "aceg"})
    tr = db.create_transaction()
    assert tr.get_key(KeySelector.first_greater_or_equal(k("a")) + 1) == k("c")
    assert tr.get_key(KeySelector.first_greater_or_equal(k("a")) + 2) == k("e")
    assert tr.get_key(KeySelector.first_greater_than(k("b")) + 1) == k("e")
    assert tr.get_key(KeySelector.last_less_or_equal(k("g")) - 1) == k("e")
    assert tr.get_key(KeySelector.last_less_than(k("g")) - 2) == k("a")
    assert tr.get_key(KeySelector(k("d"), False, 1)) == k("e")
    assert tr.get_key(KeySelector(k("d"), False, 2)) == k("g")


def test_get_key_sees_own_writes(db, k):
    """get_key resolves against the transaction's own sets and clears."""
    fill(db, {k("a"): b"", k("e"): b""})
    tr = db.create_transaction()
    tr[k("c")] = b""
    assert tr.get_key(KeySelector.first_greater_than(k("a"))) == k("c")
    del tr[k("c")]
    del tr[k("e")]
    tr[k("f")] = b""
    assert tr.get_key(KeySelector.first_greater_than(k("a"))) == k("f")


# --------------------------------------------------------------------------- snapshot and versions


def test_reads_see_one_consistent_snapshot(db, k):
    """A transaction keeps reading its read version's data after another transaction commits."""
    fill(db, {k("a"): b"old", k("b"): b"old"})
    tr1 = db.create_transaction()
    assert tr1[k("a")] == b"old"
    fill(db, {k("a"): b"new", k("b"): b"new", k("c"): b"new"})
    assert tr1[k("a")] == b"old"
    assert tr1[k("b")] == b"old"
    assert tr1[k("c")] == None  # noqa: E711
    assert pairs(tr1.get_range(k("a"), k("z"))) == [(k("a"), b"old"), (k("b"), b"old")]
    assert tr1.snapshot[k("b")] == b"old"


def test_snapshot_reads_return_the_same_data(db, k):
    """tr.snapshot reads (get, range, get_key, startswith) see the same data and own writes."""
    fill(db, {k("a"): b"1", k("b"): b"2"})
    tr = db.create_transaction()
    tr[k("c")] = b"3"
    snap = tr.snapshot
    assert snap[k("a")] == b"1"
    assert snap.get(k("b")) == b"2"
    assert snap[k("c")] == b"3"
    assert snap[k("zz")] == None  # noqa: E711
    assert pairs(snap.get_range(k("a"), k("z"))) == [(k("a"), b"1"), (k("b"), b"2"), (k("c"), b"3")]
    assert pairs(snap[k("b") : k("z")]) == [(k("b"), b"2"), (k("c"), b"3")]
    assert snap.get_key(KeySelector.first_greater_than(k("a"))) == k("b")


def test_get_read_version_is_an_int_that_advances_after_a_commit(db, k):
    """get_read_version().wait() is an int; a transaction begun after a commit reads a later version."""
    tr1 = db.create_transaction()
    v1 = tr1.get_read_version().wait()
    assert isinstance(v1, int)
    assert tr1.get_read_version().wait() == v1, "one read version per transaction"
    db[k("a")] = b"1"
    tr2 = db.create_transaction()
    v2 = tr2.get_read_version().wait()
    assert v2 > v1


def test_read_version_is_taken_lazily_at_first_read(db, k):
    """A transaction created before a commit but reading after it sees the commit, and commits."""
    tr1 = db.create_transaction()
    db[k("a")] = b"committed-later"
    assert tr1[k("a")] == b"committed-later"
    tr1[k("a")] = b"tr1"
    assert commit_outcome(tr1) == COMMITTED


# --------------------------------------------------------------------------- read your writes


def test_read_your_writes_for_point_reads(db, k):
    """A transaction sees its own sets and clears before commit; others do not."""
    db[k("a")] = b"old"
    tr = db.create_transaction()
    tr[k("a")] = b"mine"
    tr[k("b")] = b"new"
    assert tr[k("a")] == b"mine"
    assert tr[k("b")] == b"new"
    del tr[k("a")]
    assert tr[k("a")] == None  # noqa: E711
    assert not tr[k("a")].present()
    assert db[k("a")] == b"old"
    assert db[k("b")] is None


def test_read_your_writes_merges_sets_and_clears_into_range_reads(db, k):
    """Range reads merge the transaction's sets, overwrites, clears and clear_ranges with the store."""
    fill(db, {k(c): b"db" for c in "acegi"})
    tr = db.create_transaction()
    tr[k("b")] = b"tr"  # new key
    tr[k("c")] = b"tr"  # overwrite
    del tr[k("e")]  # cleared key
    tr.clear_range(k("g"), k("h"))  # clears g
    tr[k("g2")] = b"tr"  # inside [g, h), set after the clear: visible
    expected = [
        (k("a"), b"db"),
        (k("b"), b"tr"),
        (k("c"), b"tr"),
        (k("g2"), b"tr"),
        (k("i"), b"db"),
    ]
    assert pairs(tr.get_range(k("a"), k("z"))) == expected
    assert pairs(tr.get_range(k("a"), k("z"), reverse=True)) == expected[::-1]
    assert pairs(tr.get_range(k("a"), k("z"), limit=3)) == expected[:3]
    assert pairs(tr.get_range(k("a"), k("z"), limit=2, reverse=True)) == expected[::-1][:2]
    assert pairs(tr.get_range(k("b"), k("g2"))) == expected[1:3]


def test_read_your_writes_set_after_clear_range_is_visible(db, k):
    """A key set after a clear_range covering it is visible; keys set before it are gone."""
    fill(db, {k("a"): b"db", k("b"): b"db"})
    tr = db.create_transaction()
    tr[k("c")] = b"before"
    tr.clear_range(k("a"), k("z"))
    tr[k("b")] = b"after"
    assert pairs(tr.get_range(k("a"), k("z"))) == [(k("b"), b"after")]
    tr.commit().wait()
    assert pairs(db.get_range(k("a"), k("z"))) == [(k("b"), b"after")]


def test_read_your_writes_sees_atomic_add(db, k):
    """A read after add() in the same transaction returns the summed value."""
    db[k("n")] = le64(5)
    tr = db.create_transaction()
    tr.add(k("n"), le64(3))
    tr.add(k("m"), le64(7))
    assert tr[k("n")] == le64(8)
    assert tr[k("m")] == le64(7)


# --------------------------------------------------------------------------- atomic add


def test_add_is_little_endian_and_treats_missing_as_zero(db, k):
    """add() sums little-endian integers; a missing key counts as zero."""
    tr = db.create_transaction()
    tr.add(k("n"), le64(1))
    tr.commit().wait()
    tr = db.create_transaction()
    tr.add(k("n"), le64(255))
    tr.commit().wait()
    assert db[k("n")] == le64(256)
    assert struct.unpack("<q", db[k("n")])[0] == 256


def test_add_wraps_and_handles_negative_twos_complement(db, k):
    """add() wraps around at the value's width; two's-complement negatives subtract."""
    db[k("w")] = b"\xff" * 8
    db[k("s")] = le64(10)
    tr = db.create_transaction()
    tr.add(k("w"), le64(1))
    tr.add(k("s"), le64(-3))
    tr.commit().wait()
    assert db[k("w")] == le64(0)
    assert db[k("s")] == le64(7)


def test_add_resizes_the_existing_value_to_the_param_length(db, k):
    """add(): a shorter existing value is zero-extended, a longer one truncated, to len(param)."""
    db[k("short")] = b"\xff"
    db[k("long")] = b"\x01\x00\x00\x05"
    tr = db.create_transaction()
    tr.add(k("short"), b"\x01\x00")
    tr.add(k("long"), b"\x01\x00")
    tr.commit().wait()
    assert db[k("short")] == b"\x00\x01"
    assert db[k("long")] == b"\x02\x00"


# Every atomic operation on a key that holds b"\x05\x00" and on one that holds nothing, and two
# operations on one key in one transaction: (operations, result on the value, result on nothing).
# None: no key. The embedded engine applies these inside SQLite at commit; the cluster decides.
ATOMIC_CASES = {
    "add": ([("add", b"\x03\x00")], b"\x08\x00", b"\x03\x00"),
    "bit_and": ([("bit_and", b"\x06\x00")], b"\x04\x00", b"\x06\x00"),
    "bit_or": ([("bit_or", b"\x02\x00")], b"\x07\x00", b"\x02\x00"),
    "bit_xor": ([("bit_xor", b"\x01\x00")], b"\x04\x00", b"\x01\x00"),
    "max": ([("max", b"\x04\x00")], b"\x05\x00", b"\x04\x00"),
    "min": ([("min", b"\x04\x00")], b"\x04\x00", b"\x04\x00"),
    "byte_max": ([("byte_max", b"\x06")], b"\x06", b"\x06"),
    "byte_min": ([("byte_min", b"\x06")], b"\x05\x00", b"\x06"),
    "append_if_fits": ([("append_if_fits", b"XY")], b"\x05\x00XY", b"XY"),
    "compare_and_clear-match": ([("compare_and_clear", b"\x05\x00")], None, None),
    "compare_and_clear-no-match": ([("compare_and_clear", b"zz")], b"\x05\x00", None),
    "add-then-max": ([("add", b"\x01\x00"), ("max", b"\x10\x00")], b"\x10\x00", b"\x10\x00"),
    "add-twice": ([("add", b"\x03\x00"), ("add", b"\x03\x00")], b"\x0b\x00", b"\x06\x00"),
    "max-then-compare_and_clear": (
        [("max", b"\x07\x00"), ("compare_and_clear", b"\x07\x00")],
        None,
        None,
    ),
}


@pytest.mark.parametrize("case", list(ATOMIC_CASES))
def test_atomic_operations_on_a_value_and_on_nothing(db, k, case):
    """Each operation's result at commit, on a stored value and where there was none."""
    operations, on_value, on_nothing = ATOMIC_CASES[case]
    db[k("value")] = b"\x05\x00"
    tr = db.create_transaction()
    for name, param in operations:
        for key in (k("value"), k("nothing")):
            getattr(tr, name)(key, param)
    tr.commit().wait()
    assert db[k("value")] == on_value
    assert db[k("nothing")] == on_nothing


# --------------------------------------------------------------------------- versionstamps


def test_versionstamped_key_with_tuple_layer_completes_to_the_commit_stamp(db, keyspace):
    """set_versionstamped_key with fdb.tuple.pack_with_versionstamp writes the commit's stamp."""
    tr = db.create_transaction()
    key = fdb.tuple.pack_with_versionstamp(("events", Versionstamp()), prefix=keyspace.key())
    tr.set_versionstamped_key(key, b"payload")
    stamp_future = tr.get_versionstamp()
    tr.commit().wait()
    stamp = bytes(stamp_future.wait())
    assert len(stamp) == 10
    events = keyspace.range(("events",))
    rows = list(db.get_range(events.start, events.stop))
    assert len(rows) == 1
    name, versionstamp = keyspace.unpack(rows[0].key)
    assert name == "events"
    assert versionstamp.is_complete()
    assert versionstamp == Versionstamp(stamp, 0)
    assert rows[0].value == b"payload"


def test_versionstamped_key_with_subspace_and_user_versions(db, keyspace):
    """Subspace.pack_with_versionstamp; one commit's keys share the stamp, user versions differ."""
    log = keyspace["log"]
    tr = db.create_transaction()
    tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp.incomplete(7), "b")), b"7")
    tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp.incomplete(2), "a")), b"2")
    stamp_future = tr.get_versionstamp()
    tr.commit().wait()
    stamp = bytes(stamp_future.wait())
    rows = list(db.get_range(log.range().start, log.range().stop))
    assert [log.unpack(kv.key) for kv in rows] == [
        (Versionstamp(stamp, 2), "a"),
        (Versionstamp(stamp, 7), "b"),
    ]
    assert [kv.value for kv in rows] == [b"2", b"7"]


def test_versionstamped_value_with_tuple_layer(db, k):
    """set_versionstamped_value with a packed incomplete Versionstamp stores the commit's stamp."""
    tr = db.create_transaction()
    tr.set_versionstamped_value(k("v"), fdb.tuple.pack_with_versionstamp(("x", Versionstamp(), 5)))
    stamp_future = tr.get_versionstamp()
    tr.commit().wait()
    stamp = bytes(stamp_future.wait())
    assert fdb.tuple.unpack(db[k("v")]) == ("x", Versionstamp(stamp, 0), 5)


def test_versionstamped_value_with_raw_offset(db, k):
    """The value's last 4 bytes (little-endian) give where the 10 stamp bytes go; they are removed."""
    tr = db.create_transaction()
    tr.set_versionstamped_value(k("raw"), b"head" + b"\x00" * 10 + b"tail" + struct.pack("<I", 4))
    stamp_future = tr.get_versionstamp()
    tr.commit().wait()
    stamp = bytes(stamp_future.wait())
    assert db[k("raw")] == b"head" + stamp + b"tail"


def test_successive_commits_give_distinct_increasing_ten_byte_stamps(db, keyspace):
    """Three successive commits: 10-byte stamps, distinct, increasing; keys unpack to them."""
    log = keyspace["log"]
    stamps = []
    for i in range(3):
        tr = db.create_transaction()
        tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), str(i).encode())
        future = tr.get_versionstamp()
        tr.commit().wait()
        stamps.append(bytes(future.wait()))
    assert all(len(s) == 10 for s in stamps)
    assert len(set(stamps)) == 3
    assert stamps == sorted(stamps)
    rows = list(db.get_range(log.range().start, log.range().stop))
    assert [log.unpack(kv.key)[0] for kv in rows] == [Versionstamp(s, 0) for s in stamps]
    assert [kv.value for kv in rows] == [b"0", b"1", b"2"]


def test_overlapping_blind_versionstamped_inserts_both_commit(db, keyspace):
    """Two insert-only transactions open at once both commit; their stamps follow commit order."""
    log = keyspace["log"]
    tr1 = db.create_transaction()
    tr2 = db.create_transaction()
    tr1.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"1")
    tr2.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"2")
    f1, f2 = tr1.get_versionstamp(), tr2.get_versionstamp()
    assert commit_outcome(tr2) == COMMITTED
    assert commit_outcome(tr1) == COMMITTED
    assert bytes(f2.wait()) < bytes(f1.wait())
    assert [kv.value for kv in db.get_range(log.range().start, log.range().stop)] == [b"2", b"1"]


def test_versionstamp_of_a_plain_write_commit_is_ready_after_commit(db, k):
    """get_versionstamp() works for any committed write, not only versionstamped operations."""
    tr = db.create_transaction()
    tr[k("a")] = b"1"
    future = tr.get_versionstamp()
    tr.commit().wait()
    assert len(bytes(future.wait())) == 10


def test_versionstamps_across_threads_are_unique_and_increase_in_commit_order(db, keyspace):
    """Stamps from concurrent threads are unique; taken under a lock, they follow commit order."""
    log = keyspace["log"]
    lock = threading.Lock()
    in_commit_order: list[bytes] = []
    per_thread: dict[int, list[bytes]] = {}

    def writer(n: int) -> Callable[[], None]:
        def run() -> None:
            mine = per_thread.setdefault(n, [])
            for i in range(8):
                tr = db.create_transaction()
                tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"%d" % n)
                future = tr.get_versionstamp()
                if i % 2:
                    with lock:  # commit and record atomically: the list is in commit order
                        tr.commit().wait()
                        in_commit_order.append(bytes(future.wait()))
                else:
                    tr.commit().wait()
                mine.append(bytes(future.wait()))

        return run

    run_threads(*(writer(n) for n in range(4)))
    every = [s for stamps in per_thread.values() for s in stamps]
    assert len(every) == 32
    assert len(set(every)) == 32
    for stamps in per_thread.values():
        assert stamps == sorted(stamps)
    assert in_commit_order == sorted(in_commit_order)
    rows = list(db.get_range(log.range().start, log.range().stop))
    assert sorted(log.unpack(kv.key)[0].tr_version for kv in rows) == sorted(every)


# --------------------------------------------------------------------------- on_error and reset


def test_on_error_1020_resets_the_transaction_and_drops_its_writes(db, k):
    """on_error(1020) returns after a back-off and reset: earlier writes are gone, reads fresh."""
    db[k("a")] = b"old"
    tr = db.create_transaction()
    assert tr[k("a")] == b"old"
    tr[k("mine")] = b"written-before-error"
    db[k("a")] = b"new"
    assert tr.on_error(FDBError(NOT_COMMITTED)).wait() is None
    assert tr[k("mine")] == None  # noqa: E711
    assert tr[k("a")] == b"new", "after the reset the transaction reads a new version"
    tr.commit().wait()
    assert db[k("mine")] is None


@pytest.mark.parametrize("code", [COMMIT_UNKNOWN_RESULT, TRANSACTION_TOO_OLD])
def test_on_error_retries_1021_and_1007(db, k, code):
    """on_error also retries 1021 (commit_unknown_result) and 1007 (transaction_too_old)."""
    tr = db.create_transaction()
    tr[k("a")] = b"1"
    tr.on_error(FDBError(code)).wait()
    assert tr[k("a")] == None  # noqa: E711
    tr[k("b")] = b"2"
    tr.commit().wait()
    assert db[k("b")] == b"2"


@pytest.mark.parametrize("code", [VALUE_TOO_LARGE, KEY_TOO_LARGE, TRANSACTION_TOO_LARGE])
def test_on_error_reraises_non_retryable_errors(db, code):
    """on_error re-raises an error FoundationDB does not retry (e.g. 2103 value_too_large)."""
    tr = db.create_transaction()
    expect_error(code, lambda: tr.on_error(FDBError(code)).wait())


def test_reset_drops_writes_and_takes_a_new_read_version(db, k):
    """reset() discards pending writes and the read version."""
    tr = db.create_transaction()
    assert tr[k("a")] == None  # noqa: E711
    tr[k("mine")] = b"x"
    db[k("a")] = b"other"
    tr.reset()
    assert tr[k("mine")] == None  # noqa: E711
    assert tr[k("a")] == b"other"
    tr.commit().wait()
    assert db[k("mine")] is None


def test_reset_transaction_does_not_conflict_on_reads_made_before_reset(db, k):
    """Read conflict ranges are dropped by reset(): only reads after it count."""
    db[k("a")] = b"old"
    tr = db.create_transaction()
    assert tr[k("a")] == b"old"
    db[k("a")] = b"new"
    tr.reset()
    tr[k("b")] = b"x"
    assert commit_outcome(tr) == COMMITTED


# --------------------------------------------------------------------------- conflicts, one thread


def test_plain_read_then_concurrent_write_conflicts(db, k):
    """Read of a key, another transaction writes it and commits, then commit: 1020."""
    db[k("a")] = b"0"

    def read(tr):
        assert tr[k("a")] == b"0"

    outcome = interleave(db, read, lambda tr: tr.set(k("a"), b"1"), k("marker"))
    assert outcome == NOT_COMMITTED
    assert db[k("marker")] is None, "a failed commit writes nothing"


def test_snapshot_read_does_not_conflict(db, k):
    """The same interleaving with a snapshot read: both commit."""
    db[k("a")] = b"0"

    def read(tr):
        assert tr.snapshot[k("a")] == b"0"

    assert interleave(db, read, lambda tr: tr.set(k("a"), b"1"), k("marker")) == COMMITTED
    assert db[k("marker")] == b"tr1"
    assert db[k("a")] == b"1"


def test_snapshot_range_read_does_not_conflict(db, k):
    """A snapshot range read adds no read conflict range."""
    fill(db, {k("a"): b"0"})

    def read(tr):
        list(tr.snapshot.get_range(k("a"), k("z")))

    assert interleave(db, read, lambda tr: tr.set(k("m"), b"1"), k("marker")) == COMMITTED


def test_read_of_missing_key_conflicts_with_its_creation(db, k):
    """Reading an absent key conflicts with a concurrent transaction creating it."""

    def read(tr):
        assert not tr[k("a")].present()

    assert interleave(db, read, lambda tr: tr.set(k("a"), b"1"), k("marker")) == NOT_COMMITTED


def test_read_of_a_key_does_not_conflict_with_write_of_a_neighbour(db, k):
    """A point read covers [key, key+\\x00): writes of other keys do not conflict."""
    fill(db, {k("a"): b"0"})

    def read(tr):
        assert tr[k("a")] == b"0"

    outcome = interleave(db, read, lambda tr: tr.set(k("a") + b"\x00", b"1"), k("marker"))
    assert outcome == COMMITTED


def test_full_range_read_conflicts_with_insert_into_the_range(db, k):
    """A range read conflicts with a concurrent insert of a new key inside it (no phantoms)."""
    fill(db, {k("a"): b"", k("c"): b""})

    def read(tr):
        assert len(list(tr.get_range(k("a"), k("d")))) == 2

    assert interleave(db, read, lambda tr: tr.set(k("b"), b""), k("marker")) == NOT_COMMITTED


def test_range_read_does_not_conflict_with_writes_outside_or_at_its_end(db, k):
    """A range read [b, e) does not conflict with writes before b or at/after e."""
    fill(db, {k("b"): b"", k("c"): b""})

    def read(tr):
        list(tr.get_range(k("b"), k("d")))

    def write(tr):
        tr[k("a")] = b""
        tr[k("d")] = b""
        tr[k("e")] = b""

    assert interleave(db, read, write, k("marker")) == COMMITTED


def test_range_read_conflicts_with_concurrent_clear_range(db, k):
    """A concurrent clear_range over keys a transaction read makes it fail with 1020."""
    fill(db, {k("a"): b"", k("b"): b""})

    def read(tr):
        assert tr[k("b")] == b""

    assert interleave(db, read, lambda tr: tr.clear_range(k("a"), k("z")), k("marker")) == NOT_COMMITTED


@pytest.mark.parametrize(
    ("written", "expected"),
    [("a0", NOT_COMMITTED), ("b", NOT_COMMITTED), ("c", COMMITTED), ("e", COMMITTED)],
)
def test_forward_limited_range_read_conflicts_only_on_the_part_read(db, keyspace, k, written, expected):
    """Forward limit=1 read returning b covers [begin, b+\\x00): a0 conflicts, c and e do not."""
    fill(db, {k("b"): b"", k("d"): b"", k("f"): b""})
    r = keyspace.range()

    def read(tr):
        assert [kv.key for kv in tr.get_range(r.start, r.stop, limit=1)] == [k("b")]

    assert interleave(db, read, lambda tr: tr.set(k(written), b"w"), k("marker")) == expected


@pytest.mark.parametrize(
    ("written", "expected"),
    [("c", COMMITTED), ("e", COMMITTED), ("f", NOT_COMMITTED), ("g", NOT_COMMITTED)],
)
def test_reverse_limited_range_read_conflicts_only_on_the_part_read(db, keyspace, k, written, expected):
    """Reverse limit=1 read returning f covers [f, end): c does not conflict, g does."""
    fill(db, {k("b"): b"", k("d"): b"", k("f"): b""})
    r = keyspace.range()

    def read(tr):
        assert [kv.key for kv in tr.get_range(r.start, r.stop, limit=1, reverse=True)] == [k("f")]

    assert interleave(db, read, lambda tr: tr.set(k(written), b"w"), k("marker")) == expected


@pytest.mark.parametrize(
    ("selector", "found", "written", "expected"),
    [
        ("first_greater_or_equal", "d", "c", NOT_COMMITTED),
        ("first_greater_or_equal", "d", "e", COMMITTED),
        ("last_less_than", "a", "b", NOT_COMMITTED),
        ("last_less_than", "a", "e", COMMITTED),
    ],
)
def test_get_key_conflicts_between_anchor_and_found_key(db, k, selector, found, written, expected):
    """get_key reads the keys between the selector's anchor and the key found (and only those)."""
    fill(db, {k("a"): b"", k("d"): b""})
    anchor = "b" if selector == "first_greater_or_equal" else "d"

    def read(tr):
        assert tr.get_key(getattr(KeySelector, selector)(k(anchor))) == k(found)

    assert interleave(db, read, lambda tr: tr.set(k(written), b"w"), k("marker")) == expected


def test_concurrent_atomic_adds_both_commit(db, k):
    """Two transactions add 1 to the same key: both commit, the value is 2 (add reads nothing)."""
    tr1 = db.create_transaction()
    tr2 = db.create_transaction()
    tr1.get_read_version().wait()
    tr2.get_read_version().wait()
    tr1.add(k("n"), le64(1))
    tr2.add(k("n"), le64(1))
    tr2.commit().wait()
    assert commit_outcome(tr1) == COMMITTED
    assert db[k("n")] == le64(2)


def test_atomic_add_adds_no_read_conflict(db, k):
    """A transaction that only add()s a key commits even if the key was set concurrently."""
    db[k("n")] = le64(10)
    tr1 = db.create_transaction()
    tr1.get_read_version().wait()
    tr1.add(k("n"), le64(1))
    db[k("n")] = le64(100)
    assert commit_outcome(tr1) == COMMITTED
    assert db[k("n")] == le64(101)


def test_blind_sets_of_one_key_both_commit_and_the_later_wins(db, k):
    """Two transactions set the same key without reading: both commit, the later commit wins."""
    tr1 = db.create_transaction()
    tr2 = db.create_transaction()
    tr1.get_read_version().wait()
    tr2.get_read_version().wait()
    tr1[k("a")] = b"tr1"
    tr2[k("a")] = b"tr2"
    tr2.commit().wait()
    assert commit_outcome(tr1) == COMMITTED
    assert db[k("a")] == b"tr1", "tr1 committed last"


def test_write_only_transactions_never_conflict(db, k):
    """Write-write overlap alone never conflicts, even for clear_range over concurrent writes."""
    fill(db, {k("a"): b"0"})
    tr1 = db.create_transaction()
    tr1.get_read_version().wait()
    tr1[k("a")] = b"tr1"
    tr1.clear_range(k("b"), k("z"))
    db[k("a")] = b"other"
    db[k("c")] = b"other"
    assert commit_outcome(tr1) == COMMITTED
    assert pairs(db.get_range(k("a"), k("z"))) == [(k("a"), b"tr1")]


def test_read_only_transaction_commits_trivially(db, k):
    """A transaction with reads but no writes commits even after its reads were overwritten."""
    db[k("a")] = b"0"
    tr1 = db.create_transaction()
    assert tr1[k("a")] == b"0"
    list(tr1.get_range(k("a"), k("z")))
    db[k("a")] = b"1"
    assert commit_outcome(tr1) == COMMITTED


def test_commit_after_read_version_but_before_first_read_conflicts(db, k):
    """get_read_version() fixes the version: a commit after it conflicts with later reads."""
    db[k("a")] = b"0"
    tr1 = db.create_transaction()
    tr1.get_read_version().wait()
    db[k("a")] = b"1"
    assert tr1[k("a")] == b"0", "reads happen at the read version already taken"
    tr1[k("marker")] = b"x"
    assert commit_outcome(tr1) == NOT_COMMITTED


def test_two_read_modify_writes_of_one_key_first_committer_wins(db, k):
    """Both read then both write one key: the first commit wins, the second fails with 1020."""
    db[k("n")] = b"0"
    tr1 = db.create_transaction()
    tr2 = db.create_transaction()
    assert tr1[k("n")] == b"0"
    assert tr2[k("n")] == b"0"
    tr1[k("n")] = b"1"
    tr2[k("n")] = b"2"
    assert commit_outcome(tr2) == COMMITTED
    assert commit_outcome(tr1) == NOT_COMMITTED
    assert db[k("n")] == b"2"


def test_explicit_read_conflict_key_causes_conflict(db, k):
    """add_read_conflict_key(k) without reading makes a concurrent write of k conflict."""

    def read(tr):
        tr.get_read_version().wait()
        tr.add_read_conflict_key(k("a"))

    assert interleave(db, read, lambda tr: tr.set(k("a"), b"1"), k("marker")) == NOT_COMMITTED


def test_explicit_read_conflict_key_promotes_a_snapshot_read(db, k):
    """A snapshot read plus add_read_conflict_key conflicts like a plain read."""
    db[k("a")] = b"0"

    def read(tr):
        assert tr.snapshot[k("a")] == b"0"
        tr.add_read_conflict_key(k("a"))

    assert interleave(db, read, lambda tr: tr.set(k("a"), b"1"), k("marker")) == NOT_COMMITTED


@pytest.mark.parametrize(("written", "expected"), [("a", NOT_COMMITTED), ("b", NOT_COMMITTED), ("c", COMMITTED)])
def test_explicit_read_conflict_range_is_half_open(db, k, written, expected):
    """add_read_conflict_range(a, c) conflicts with writes in [a, c) and not with c."""

    def read(tr):
        tr.get_read_version().wait()
        tr.add_read_conflict_range(k("a"), k("c"))

    assert interleave(db, read, lambda tr: tr.set(k(written), b"1"), k("marker")) == expected


def test_explicit_write_conflict_key_causes_conflict(db, k):
    """add_write_conflict_key(k) in a transaction that never writes k conflicts with readers of k."""
    db[k("a")] = b"0"

    def read(tr):
        assert tr[k("a")] == b"0"

    def write(tr):
        tr.add_write_conflict_key(k("a"))
        tr[k("elsewhere")] = b"1"

    assert interleave(db, read, write, k("marker")) == NOT_COMMITTED
    assert db[k("a")] == b"0", "a write conflict range writes no data"


@pytest.mark.parametrize(("read_key", "expected"), [("b", NOT_COMMITTED), ("c", COMMITTED)])
def test_explicit_write_conflict_range_is_half_open(db, k, read_key, expected):
    """add_write_conflict_range(a, c) conflicts with readers of b, not of c."""

    def read(tr):
        assert not tr[k(read_key)].present()

    def write(tr):
        tr.add_write_conflict_range(k("a"), k("c"))
        tr[k("elsewhere")] = b"1"

    assert interleave(db, read, write, k("marker")) == expected


def test_versionstamped_insert_conflicts_with_reader_of_the_range_tail(db, keyspace):
    """A versionstamped key's write conflict range runs to the 0xff-filled stamp: tail readers conflict."""
    log = keyspace["log"]
    tr0 = db.create_transaction()
    tr0.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"old")
    future = tr0.get_versionstamp()
    tr0.commit().wait()
    old_key = log.pack((Versionstamp(bytes(future.wait()), 0),))

    def read_tail(tr):
        assert list(tr.get_range(old_key + b"\x00", log.range().stop)) == []

    def insert(tr):
        tr.get_read_version().wait()
        tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"new")

    assert interleave(db, read_tail, insert, keyspace.pack(("marker",))) == NOT_COMMITTED


def test_versionstamped_insert_does_not_conflict_below_its_read_version(db, keyspace):
    """The versionstamped write range starts at the stamp filled with the writer's read version."""
    log = keyspace["log"]
    tr0 = db.create_transaction()
    tr0.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"old")
    future = tr0.get_versionstamp()
    tr0.commit().wait()
    old_key = log.pack((Versionstamp(bytes(future.wait()), 0),))
    # One more commit, so the inserter's read version is strictly after the old key's version
    # (the old stamp's batch bytes could otherwise exceed the 0 the lower bound is filled with).
    db[keyspace.pack(("bump",))] = b""

    def read_head(tr):
        assert list(tr.get_range(log.range().start, old_key)) == []

    def insert(tr):
        tr.get_read_version().wait()  # read version >= the old commit's version
        tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"new")

    assert interleave(db, read_head, insert, keyspace.pack(("marker",))) == COMMITTED


def test_versionstamped_key_is_inserted_after_existing_keys_of_the_log(db, keyspace):
    """A new versionstamped key sorts after every key written by earlier commits."""
    log = keyspace["log"]
    for value in (b"1", b"2"):
        tr = db.create_transaction()
        tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), value)
        tr.commit().wait()
    assert [kv.value for kv in db.get_range(log.range().start, log.range().stop)] == [b"1", b"2"]


# --------------------------------------------------------------------------- conflicts, two threads


def test_threads_plain_read_then_concurrent_write_conflicts(db, k):
    """Across two threads: read, other thread writes and commits, then commit -> 1020."""
    db[k("a")] = b"0"
    read_done = threading.Event()
    written = threading.Event()
    outcome: list[Any] = []

    def reader() -> None:
        tr = db.create_transaction()
        assert tr[k("a")] == b"0"
        read_done.set()
        assert written.wait(WAIT)
        tr[k("marker")] = b"x"
        outcome.append(commit_outcome(tr))

    def writer() -> None:
        try:
            assert read_done.wait(WAIT)
            tr = db.create_transaction()
            tr[k("a")] = b"1"
            tr.commit().wait()
        finally:
            written.set()

    run_threads(reader, writer)
    assert outcome == [NOT_COMMITTED]
    assert db[k("a")] == b"1"


def test_threads_snapshot_read_does_not_conflict(db, k):
    """Across two threads the same interleaving with a snapshot read commits both."""
    db[k("a")] = b"0"
    read_done = threading.Event()
    written = threading.Event()
    outcome: list[Any] = []

    def reader() -> None:
        tr = db.create_transaction()
        assert tr.snapshot[k("a")] == b"0"
        read_done.set()
        assert written.wait(WAIT)
        tr[k("marker")] = b"x"
        outcome.append(commit_outcome(tr))

    def writer() -> None:
        try:
            assert read_done.wait(WAIT)
            db[k("a")] = b"1"
        finally:
            written.set()

    run_threads(reader, writer)
    assert outcome == [COMMITTED]


def test_threads_read_modify_write_after_barrier_exactly_one_commits(db, k):
    """Two threads read a key, meet at a barrier, then both write it: exactly one gets 1020."""
    db[k("n")] = b"0"
    barrier = threading.Barrier(2, timeout=WAIT)
    outcomes: list[Any] = []
    lock = threading.Lock()

    def worker(value: bytes) -> Callable[[], None]:
        def run() -> None:
            tr = db.create_transaction()
            assert tr[k("n")] == b"0"
            barrier.wait()
            tr[k("n")] = value
            result = commit_outcome(tr)
            with lock:
                outcomes.append(result)

        return run

    run_threads(worker(b"1"), worker(b"2"))
    assert sorted(outcomes, key=str) == sorted([COMMITTED, NOT_COMMITTED], key=str)
    assert db[k("n")] in (b"1", b"2")


def test_threads_concurrent_atomic_adds_never_conflict(db, k):
    """Threads adding to one counter with add() all commit on the first try."""
    barrier = threading.Barrier(4, timeout=WAIT)
    outcomes: list[Any] = []

    def adder() -> None:
        for _ in range(5):
            tr = db.create_transaction()
            tr.get_read_version().wait()
            tr.add(k("n"), le64(1))
            if _ == 0:
                barrier.wait()
            outcomes.append(commit_outcome(tr))

    run_threads(*(adder for _ in range(4)))
    assert outcomes == [COMMITTED] * 20
    assert db[k("n")] == le64(20)


def test_transactional_retries_after_a_real_conflict_and_commits(db, k):
    """@transactional: a conflict (another thread commits between read and commit) reruns the body once."""
    db[k("n")] = b"0"
    first_read = threading.Event()
    interloper_done = threading.Event()
    attempts: list[int] = []

    def interloper() -> None:
        try:
            assert first_read.wait(WAIT)
            tr = db.create_transaction()
            tr[k("n")] = b"10"
            tr.commit().wait()
        finally:
            interloper_done.set()

    @transactional
    def increment(tr) -> int:
        attempts.append(1)
        current = int(bytes(tr[k("n")]))
        if len(attempts) == 1:
            first_read.set()
            assert interloper_done.wait(WAIT)
        tr[k("n")] = str(current + 1).encode()
        return current

    thread = threading.Thread(target=interloper, daemon=True)
    thread.start()
    returned = increment(db)
    thread.join(WAIT)
    assert not thread.is_alive()
    assert len(attempts) == 2, "one conflict, one retry"
    assert returned == 10
    assert db[k("n")] == b"11"


def test_threads_increments_are_serializable(db, k):
    """8 threads x N read-modify-write increments through @transactional: exactly 8*N, no lost update."""
    threads, per_thread = 8, 10
    attempts = [0] * threads
    start = threading.Barrier(threads, timeout=WAIT)

    @transactional
    def increment(tr, n: int) -> None:
        attempts[n] += 1
        value = tr[k("counter")]
        current = struct.unpack("<q", bytes(value))[0] if value.present() else 0
        tr[k("counter")] = le64(current + 1)

    def worker(n: int) -> Callable[[], None]:
        def run() -> None:
            start.wait()
            for _ in range(per_thread):
                increment(db, n)

        return run

    run_threads(*(worker(n) for n in range(threads)))
    assert struct.unpack("<q", db[k("counter")])[0] == threads * per_thread
    assert sum(attempts) >= threads * per_thread


# --------------------------------------------------------------------------- limits


def commit_with(db: Any, write: Callable[[Any], None]) -> None:
    tr = db.create_transaction()
    write(tr)
    tr.commit().wait()


def test_value_of_100000_bytes_commits(db, k):
    """A value of exactly 100,000 bytes is accepted."""
    commit_with(db, lambda tr: tr.set(k("big"), b"v" * 100_000))
    assert len(db[k("big")]) == 100_000


def test_value_of_100001_bytes_fails_with_2103(db, k):
    """A value of 100,001 bytes fails with 2103 value_too_large (at set or at commit) and writes nothing."""
    expect_error(VALUE_TOO_LARGE, lambda: commit_with(db, lambda tr: tr.set(k("big"), b"v" * 100_001)))
    assert db[k("big")] is None


def test_key_of_10000_bytes_commits(db, keyspace):
    """A key of exactly 10,000 bytes is accepted."""
    key = keyspace.key() + b"k" * (10_000 - len(keyspace.key()))
    assert len(key) == 10_000
    commit_with(db, lambda tr: tr.set(key, b"v"))
    assert db[key] == b"v"


def test_key_of_10001_bytes_fails_with_2102(db, keyspace):
    """A key of 10,001 bytes fails with 2102 key_too_large (at set or at commit)."""
    key = keyspace.key() + b"k" * (10_001 - len(keyspace.key()))
    assert len(key) == 10_001
    expect_error(KEY_TOO_LARGE, lambda: commit_with(db, lambda tr: tr.set(key, b"v")))


def test_transaction_over_10mb_fails_with_2101(db, k):
    """Over 10,000,000 bytes fails with 2101 transaction_too_large, and nothing is written."""
    chunk = b"x" * 100_000

    def write(tr):
        for i in range(101):
            tr[k("bulk", i)] = chunk

    expect_error(TRANSACTION_TOO_LARGE, lambda: commit_with(db, write))
    assert db[k("bulk", 0)] is None


def test_transaction_just_under_10mb_commits(db, k):
    """A 9.5 MB transaction is within the limit and commits."""
    chunk = b"x" * 100_000

    def write(tr):
        for i in range(95):
            tr[k("bulk", i)] = chunk

    commit_with(db, write)
    assert len(list(db.get_range(k("bulk", 0), k("bulk", 95)))) == 95


# --------------------------------------------------------------------------- 1007 on a real cluster


@pytest.mark.cluster
def test_old_read_write_transaction_fails_1007_and_read_only_one_commits_on_cluster(cluster_database):
    """What FoundationDB guarantees 6 s after a read version: a read-write transaction cannot
    commit (1007, from a read or from the commit), while a read-only one, whose reads were
    served, commits (it has nothing to resolve).

    A read may still be served from an idle cluster's storage after 5 s, so the test accepts
    either place for the 1007 but insists on it before anything is written. The cluster's clock
    cannot be faked, so this test waits out the window; test_engine_embedded.py pins the same
    behaviour on the embedded engine with a fake clock.
    """
    space = fdb.Subspace(("fdbqueue-test", uuid.uuid4().hex))
    writer = cluster_database.create_transaction()
    assert not writer[space.pack(("seen",))].present()
    reader = cluster_database.create_transaction()
    assert not reader[space.pack(("seen",))].present()
    time.sleep(6.0)  # not synchronisation: the behaviour under test is the passage of time

    def late_read_then_commit():
        writer[space.pack(("late",))].wait()
        writer[space.pack(("written",))] = b"x"
        writer.commit().wait()

    error = expect_error(TRANSACTION_TOO_OLD, late_read_then_commit)
    assert commit_outcome(reader) == COMMITTED
    writer.on_error(error).wait()
    assert not writer[space.pack(("written",))].present()
    writer[space.pack(("written",))] = b"x"
    writer.commit().wait()
    assert cluster_database[space.pack(("written",))] == b"x"
    del cluster_database[space.range().start : space.range().stop]


# --------------------------------------------------------------------------- commit once


def test_a_committed_transaction_cannot_commit_again_2017(db, k):
    """After a successful commit, commit fails with 2017 (used_during_commit) until reset: nothing
    applies twice, and a write made after the commit raises nothing at once but is never applied.
    """
    tr = db.create_transaction()
    tr.add(k("counter"), le64(1))
    tr[k("first")] = b"1"
    tr.commit().wait()
    tr[k("after")] = b"never"  # no error here, as in the binding
    expect_error(2017, lambda: tr.commit().wait())
    expect_error(2017, lambda: tr.commit().wait())
    assert db[k("counter")] == le64(1)
    assert db[k("after")] is None
    tr.reset()
    tr[k("second")] = b"2"
    tr.commit().wait()
    assert db[k("second")] == b"2"
    assert db[k("counter")] == le64(1)


def test_a_read_only_transaction_cannot_commit_twice_either(db, k):
    tr = db.create_transaction()
    tr[k("nothing")].wait()
    tr.commit().wait()
    expect_error(2017, lambda: tr.commit().wait())


# --------------------------------------------------------------------------- range reads start at once


def test_a_range_read_that_is_never_iterated_still_conflicts(db, k):
    """get_range sends its read when called: its conflict range exists even if nobody iterates."""
    fill(db, {k("r", 1): b"1", k("r", 5): b"5"})
    outcome = interleave(
        db,
        lambda tr: tr.get_range(k("r", 0), k("r", 9)),
        lambda tr: tr.set(k("r", 3), b"3"),
        k("marker"),
    )
    assert outcome == NOT_COMMITTED


def test_a_snapshot_range_read_that_is_never_iterated_does_not_conflict(db, k):
    fill(db, {k("r", 1): b"1"})
    outcome = interleave(
        db,
        lambda tr: tr.snapshot.get_range(k("r", 0), k("r", 9)),
        lambda tr: tr.set(k("r", 3), b"3"),
        k("marker"),
    )
    assert outcome == COMMITTED


# --------------------------------------------------------------------------- size as the cluster counts it


def test_overwriting_one_key_many_times_counts_its_final_value_once(db, k):
    """11,000 sets of one key with a 1 KB value (11 MB of calls) commit: the last one counts."""
    value = b"v" * 1000

    def write(tr):
        for index in range(11_000):
            tr[k("same")] = value[:-5] + b"%05d" % index

    commit_with(db, write)
    assert db[k("same")] == value[:-5] + b"10999"


def test_reading_one_key_many_times_counts_its_conflict_range_once(db, keyspace):
    """Conflict ranges count coalesced: 20,000 reads of one 2 KB key (80 MB if each counted)
    and one write commit."""
    key = keyspace.key() + b"k" * (2_000 - len(keyspace.key()))
    fill(db, {key: b"v"})

    def read_often(tr):
        for _ in range(20_000):
            assert tr[key] == b"v"
        tr[keyspace.pack(("written",))] = b"x"

    commit_with(db, read_often)
    assert db[keyspace.pack(("written",))] == b"x"


# --------------------------------------------------------------------------- watches

WATCH_WAIT = 30.0


def wait_ready(future: Any, timeout: float = WATCH_WAIT) -> bool:
    """Wait (bounded) for a watch through on_ready, the binding's non-blocking hook."""
    ready = threading.Event()
    future.on_ready(lambda _f: ready.set())
    return ready.wait(timeout)


def test_watch_fires_when_another_transaction_changes_the_key(db, k):
    """A watch set in a committed transaction fires when a later transaction changes the key."""
    fill(db, {k("w"): b"before"})
    tr = db.create_transaction()
    assert tr[k("w")] == b"before"
    watch = tr.watch(k("w"))
    tr.commit().wait()
    db[k("w")] = b"after"
    assert wait_ready(watch), "the watch did not fire after the key changed"
    watch.wait()  # ready: returns without raising


def test_watch_on_a_missing_key_fires_when_it_is_created(db, k):
    """Watching an absent key: its creation is a change."""
    tr = db.create_transaction()
    watch = tr.watch(k("born"))
    tr.commit().wait()
    db[k("born")] = b"here"
    assert wait_ready(watch)


def test_watch_compares_against_the_watching_transactions_own_write(db, k):
    """A writer's watch starts from the value it wrote, and fires when someone else changes it."""
    tr = db.create_transaction()
    tr[k("mine")] = b"written"
    watch = tr.watch(k("mine"))
    tr.commit().wait()
    del db[k("mine")]
    assert wait_ready(watch)


def test_watch_of_a_transaction_that_fails_to_commit_carries_the_commit_error(db, k):
    """If the watching transaction does not commit, its watch fails with the commit's error."""
    fill(db, {k("x"): b"0"})
    tr = db.create_transaction()
    tr[k("x")].wait()
    watch = tr.watch(k("x"))
    db[k("x")] = b"1"  # makes tr's read stale
    tr[k("y")] = b"write"
    expect_error(NOT_COMMITTED, lambda: tr.commit().wait())
    assert wait_ready(watch)
    expect_error(NOT_COMMITTED, watch.wait)


def test_setting_a_watch_reads_its_key_so_a_concurrent_change_conflicts(db, k):
    """A watch reads its key with an ordinary read: a change by another transaction before this
    one commits fails the commit with 1020, and the retry's watch starts from the new value."""
    fill(db, {k("w"): b"old"})
    tr = db.create_transaction()
    watch = tr.watch(k("w"))
    db[k("w")] = b"new"
    tr[k("marker")] = b"x"
    error = expect_error(NOT_COMMITTED, lambda: tr.commit().wait())
    assert wait_ready(watch)
    expect_error(NOT_COMMITTED, watch.wait)
    tr.on_error(error).wait()
    watch = tr.watch(k("w"))
    tr[k("marker")] = b"x"
    tr.commit().wait()
    db[k("w")] = b"newer"
    assert wait_ready(watch), "the retry's watch did not fire on the next change"


def test_cancelled_watch_raises_operation_cancelled(db, k):
    """cancel() ends a waiting watch with 1101 (operation_cancelled)."""
    tr = db.create_transaction()
    watch = tr.watch(k("never"))
    tr.commit().wait()
    watch.cancel()
    assert wait_ready(watch)
    expect_error(1101, watch.wait)


def test_inverted_conflict_ranges_are_refused_with_2005(db, k):
    """add_read/write_conflict_range with begin > end fails with inverted_range."""
    tr = db.create_transaction()
    expect_error(2005, lambda: tr.add_read_conflict_range(k("b"), k("a")))
    expect_error(2005, lambda: tr.add_write_conflict_range(k("b"), k("a")))


def test_reads_reaching_this_transactions_versionstamped_insert_fail_1036(db, keyspace):
    """Where a versionstamped key may land is unreadable until commit (accessed_unreadable)."""
    log = keyspace["log"]
    fill(db, {log.pack(("a-string-sorts-first",)): b"before"})
    tr = db.create_transaction()
    tr.get_read_version().wait()
    tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"new")
    r = log.range()
    # A read that stops before the unknowable part is fine ...
    assert [kv.value for kv in tr.get_range(r.start, r.stop, limit=1)] == [b"before"]
    # ... one that must go through it is not, in either direction.
    expect_error(1036, lambda: list(tr.get_range(r.start, r.stop)))
    expect_error(1036, lambda: list(tr.get_range(r.start, r.stop, limit=1, reverse=True)))
    # ... and a transaction that hit 1036 cannot commit (a cluster refuses it with 1036 too),
    expect_error(1036, lambda: tr.commit().wait())
    assert [kv.value for kv in db.get_range(r.start, r.stop)] == [b"before"]
    # ... while one that stays out of the landing range commits its insert.
    tr = db.create_transaction()
    tr.get_read_version().wait()
    tr.set_versionstamped_key(log.pack_with_versionstamp((Versionstamp(),)), b"new")
    assert [kv.value for kv in tr.get_range(r.start, r.stop, limit=1)] == [b"before"]
    tr.commit().wait()
    assert [kv.value for kv in db.get_range(r.start, r.stop)] == [b"before", b"new"]


# --------------------------------------------------------------------------- writes after a versionstamped value
#
# FoundationDB's client keeps every mutation of a key in the transaction, in order: an atomic
# operation after set_versionstamped_value applies at commit to the stamped value. The key stays
# unreadable (1036) in that transaction, even after a plain set, until a clear.

# A versionstamped value: the 10-byte stamp, then six zero bytes, then the offset (0).
STAMP_BODY = b"\x00" * 16 + struct.pack("<I", 0)


def stamped(stamp: bytes) -> bytes:
    """What STAMP_BODY becomes at the commit whose stamp is ``stamp``."""
    return stamp + b"\x00" * 6


def plus(value: bytes, n: int, width: int = 8) -> bytes:
    """FoundationDB's add: ``value`` cut (or zero-padded) to ``width`` bytes, little-endian, plus n."""
    total = int.from_bytes(value[:width].ljust(width, b"\x00"), "little") + n
    return (total % (1 << (8 * width))).to_bytes(width, "little")


def write(tr: Any, key: bytes, op: str, param: Any) -> None:
    """One of the writes the cases below list, by name."""
    if op == "set":
        tr[key] = param
    elif op == "clear":
        del tr[key]
    elif op == "clear_range":
        tr.clear_range(key, key + b"\x00")
    elif op == "stamped":
        tr.set_versionstamped_value(key, param)
    else:
        getattr(tr, op)(key, param)


AFTER_STAMPED_VALUE = {
    "add": ([("add", le64(1))], lambda s: plus(stamped(s), 1)),
    "add-twice": ([("add", le64(1)), ("add", le64(1))], lambda s: plus(stamped(s), 2)),
    "add-wider": ([("add", b"\x01" + b"\x00" * 17)], lambda s: plus(stamped(s), 1, 18)),
    "max": ([("max", b"\xff" * 16)], lambda s: b"\xff" * 16),
    "byte_max": ([("byte_max", b"\x00")], stamped),
    "byte_min": ([("byte_min", b"\x00")], lambda s: b"\x00"),
    "bit_or": ([("bit_or", b"\x00" * 10 + b"\xff")], lambda s: s + b"\xff"),
    "bit_and": ([("bit_and", b"\xff" * 4)], lambda s: s[:4]),
    "append_if_fits": ([("append_if_fits", b"XY")], lambda s: stamped(s) + b"XY"),
    "compare_and_clear-no-match": ([("compare_and_clear", b"other")], stamped),
    "set": ([("set", b"plain")], lambda s: b"plain"),
    "set-then-add": ([("set", b"x"), ("add", le64(1))], lambda s: b"y" + b"\x00" * 7),
    "add-then-set": ([("add", le64(1)), ("set", b"y")], lambda s: b"y"),
    "clear": ([("clear", None)], lambda s: None),
    "clear-then-add": ([("clear", None), ("add", le64(1))], lambda s: le64(1)),
    "add-then-clear": ([("add", le64(1)), ("clear", None)], lambda s: None),
    "add-then-stamped-again": (
        [("add", le64(1)), ("stamped", b"\x01" * 3 + b"\x00" * 10 + struct.pack("<I", 3))],
        lambda s: b"\x01" * 3 + s,
    ),
}


@pytest.mark.parametrize("case", sorted(AFTER_STAMPED_VALUE))
def test_writes_after_a_versionstamped_value_apply_to_the_stamped_value(db, k, case):
    """An atomic op (or set, or clear) after set_versionstamped_value of the same key, in one
    transaction, acts on the stamped value at commit: none of them is dropped."""
    later, expected = AFTER_STAMPED_VALUE[case]
    tr = db.create_transaction()
    tr.set_versionstamped_value(k("v"), STAMP_BODY)
    for op, param in later:
        write(tr, k("v"), op, param)
    stamp = tr.get_versionstamp()
    tr.commit().wait()
    assert db[k("v")] == expected(bytes(stamp.wait()))


READS = {
    "get": lambda tr, key: tr[key].present(),
    "snapshot-get": lambda tr, key: tr.snapshot[key].present(),
    "range": lambda tr, key: list(tr.get_range(key, key + b"\xff")),
}


@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize(
    "later",
    [[], [("set", b"x")], [("add", le64(1))], [("set", b"x"), ("add", le64(1))]],
    ids=["stamped", "then-set", "then-add", "then-set-and-add"],
)
def test_a_versionstamped_value_stays_unreadable_after_later_writes(db, k, read, later):
    """Until the commit, the key's value is unknowable (1036), a set or atomic op after it
    included; and a transaction that met 1036 cannot commit."""
    tr = db.create_transaction()
    tr.set_versionstamped_value(k("v"), STAMP_BODY)
    for op, param in later:
        write(tr, k("v"), op, param)
    expect_error(1036, lambda: READS[read](tr, k("v")))
    expect_error(1036, lambda: tr.commit().wait())
    assert db[k("v")] is None


@pytest.mark.parametrize(
    "later, expected",
    [
        ([("clear", None)], None),
        ([("clear_range", None)], None),
        ([("clear", None), ("set", b"x")], b"x"),
        ([("set", b"x"), ("clear", None)], None),
        ([("clear", None), ("add", le64(1))], le64(1)),
    ],
    ids=["clear", "clear-range", "clear-then-set", "set-then-clear", "clear-then-add"],
)
def test_a_clear_makes_a_versionstamped_value_readable_again(db, k, later, expected):
    tr = db.create_transaction()
    tr.set_versionstamped_value(k("v"), STAMP_BODY)
    for op, param in later:
        write(tr, k("v"), op, param)
    assert tr[k("v")] == expected
    tr.commit().wait()
    assert db[k("v")] == expected


# --------------------------------------------------------------------------- the metadata version key

METADATA_VERSION_KEY = b"\xff/metadataVersion"


def test_the_metadata_version_key_is_readable_and_takes_a_versionstamped_value(db, k):
    """\\xff/metadataVersion needs no system-key option: any transaction reads it, and a
    versionstamped value (14 bytes: placeholder and offset 0) sets it to the commit's stamp."""
    before = db[METADATA_VERSION_KEY]
    tr = db.create_transaction()
    tr.set_versionstamped_value(METADATA_VERSION_KEY, b"\x00" * 14)
    tr[k("marker")] = b"x"
    stamp = tr.get_versionstamp()
    tr.commit().wait()
    after = db[METADATA_VERSION_KEY]
    assert after == bytes(stamp.wait())
    assert len(after) == 10 and (before is None or after > before)


def test_the_metadata_version_cannot_be_read_by_the_transaction_that_wrote_it(db):
    tr = db.create_transaction()
    tr.set_versionstamped_value(METADATA_VERSION_KEY, b"\x00" * 14)
    expect_error(1036, lambda: tr[METADATA_VERSION_KEY].present())


def test_other_system_keys_stay_out_of_reach(db):
    tr = db.create_transaction()
    expect_error(2004, lambda: tr[b"\xff/somethingElse"].present())
