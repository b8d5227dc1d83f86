"""Engine conformance: the differences FoundationDB's binding tester found, each asserted on every engine.

Each test runs on the embedded engine and on a real cluster (``db``/``keyspace`` fixtures of
tests/conftest.py), as in test_engine_conformance.py. The binding tester itself runs in
tests/test_binding_tester.py; how it is run: docs/howto/binding-tester.md.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_fdbqueue.fdbapi import FDBError, KeySelector, fdb

EXACT = 0  # StreamingMode.exact
WANT_ALL = -2


def error_code(call: Any) -> int | None:
    """Run ``call``; the FDBError code it raised, or None."""
    try:
        call()
    except FDBError as error:
        return error.code
    return None


def test_exact_streaming_mode_without_a_limit_is_refused(db, keyspace):
    db[keyspace.pack(("a",))] = b"1"
    begin, end = keyspace.range().start, keyspace.range().stop
    tr = db.create_transaction()
    assert error_code(lambda: list(tr.get_range(begin, end, 0, False, EXACT))) == 2210
    assert error_code(lambda: list(tr.snapshot.get_range(begin, end, 0, False, EXACT))) == 2210
    assert error_code(lambda: db.get_range(begin, end, 0, False, EXACT)) == 2210
    assert [bytes(kv.value) for kv in tr.get_range(begin, end, 5, False, EXACT)] == [b"1"]
    assert [bytes(kv.value) for kv in tr.get_range(begin, end, 0, False, WANT_ALL)] == [b"1"]


def test_a_streaming_mode_that_names_no_mode_is_an_invalid_call(db, keyspace):
    tr = db.create_transaction()
    range_ = keyspace.range()
    assert error_code(lambda: list(tr.get_range(range_.start, range_.stop, 10, False, 7))) == 2000


def test_the_next_write_without_a_write_conflict_range(db, keyspace):
    """``set_next_write_no_write_conflict_range``: a reader of that key is not failed by it, but
    the write after it takes its range again."""
    quiet, loud = keyspace.pack(("quiet",)), keyspace.pack(("loud",))
    for written, outcome in ((quiet, None), (loud, 1020)):
        reader = db.create_transaction()
        reader.get(written).wait()
        reader[keyspace.pack(("mark",))] = b"x"
        writer = db.create_transaction()
        writer.options.set_next_write_no_write_conflict_range()
        writer[quiet] = b"1"
        writer[loud] = b"2"
        writer.commit().wait()
        assert error_code(lambda: reader.commit().wait()) == outcome


def test_storage_metrics_of_a_range(db, keyspace):
    """``get_estimated_range_size_bytes`` gives a byte count (a cluster's is sampled, so only its
    type is certain); ``get_range_split_points`` includes both ends of the range."""
    db[keyspace.pack(("k",))] = b"v" * 100
    begin, end = keyspace.range().start, keyspace.range().stop
    tr = db.create_transaction()
    size = tr.get_estimated_range_size_bytes(begin, end).wait()
    assert isinstance(size, int) and size >= 0
    points = [bytes(p) for p in tr.get_range_split_points(begin, end, 10_000_000).wait()]
    assert points[0] == begin and points[-1] == end


@pytest.mark.parametrize(
    ("operation", "stored", "param", "result"),
    [
        ("byte_max", b"b", b"a", b"b"),
        ("byte_min", b"b", b"a", b"a"),
        ("bit_or", b"\x01", b"\x02", b"\x03"),
        ("bit_and", b"\x03", b"\x02", b"\x02"),
        ("bit_xor", b"\x03", b"\x01", b"\x02"),
        ("append_if_fits", b"ab", b"cd", b"abcd"),
        ("compare_and_clear", b"x", b"x", None),
    ],
)
def test_every_atomic_operation_on_the_database(db, keyspace, operation, stored, param, result):
    key = keyspace.pack((operation,))
    db[key] = stored
    getattr(db, operation)(key, param)
    assert db[key] == result


def test_writes_to_a_cancelled_transaction_are_dropped_and_its_commit_fails(db, keyspace):
    """The binding's writes cannot fail when called: on a cancelled transaction they (and read
    conflict ranges) are dropped without an error, and the commit fails with 1025."""
    key = keyspace.pack(("k",))
    tr = db.create_transaction()
    tr.cancel()
    tr[key] = b"v"
    tr.clear_range(key, key + b"\xff")
    tr.add(key, b"\x01")
    tr.add_read_conflict_range(key, key + b"\x00")
    tr.add_write_conflict_key(key)
    assert error_code(lambda: tr.commit().wait()) == 1025
    assert error_code(lambda: tr.on_error(1020).wait()) == 1025
    assert db[key] is None or not db[key].present()


def test_no_committed_version_before_a_commit(db):
    assert db.create_transaction().get_committed_version() == -1


def test_a_write_over_the_limits_fails_the_reads_after_it(db, keyspace):
    """The client keeps a write's error (the value is too large) and fails every later read with
    it, and the commit."""
    tr = db.create_transaction()
    tr[keyspace.pack(("big",))] = b"v" * 100_001
    assert error_code(lambda: tr.get(keyspace.pack(("other",))).wait()) == 2103
    assert error_code(lambda: tr.commit().wait()) == 2103


def test_set_read_version(db, keyspace):
    """A version a transaction was given reads as it did; set once a transaction has a read
    version, it fails the reads after it (2010); a version ahead of the database fails them with
    1009. (A key changed since an older version reads as it was, on both engines:
    test_a_read_at_an_older_version_sees_the_database_as_it_was.)"""
    key = keyspace.pack(("k",))
    db[key] = b"before"
    first = db.create_transaction()
    version = first.get_read_version().wait()
    db[keyspace.pack(("elsewhere",))] = b"x"
    again = db.create_transaction()
    again.set_read_version(version)
    assert again[key] == b"before"
    assert again.get_read_version().wait() == version
    late = db.create_transaction()
    late.get(key).wait()
    late.set_read_version(version)
    assert error_code(lambda: late.get(key).wait()) == 2010
    ahead = db.create_transaction()
    ahead.set_read_version(version + 10**12)
    assert error_code(lambda: ahead.get(key).wait()) == 1009


def test_a_read_at_an_older_version_sees_the_database_as_it_was(db, keyspace):
    """Within the 5-second window a read version set by hand reads the database as of that
    version: keys changed, cleared or added since read as they were then, in point, range and key
    selector reads, snapshot or not. A commit checks conflicts from that version."""
    key = keyspace.pack
    db[key(("changed",))] = b"old"
    db[key(("cleared",))] = b"gone"
    db[key(("same",))] = b"1"
    before = db.create_transaction()  # kept: a transaction gone cancels its futures (1025)
    version = before.get_read_version().wait()
    tr = db.create_transaction()
    tr[key(("changed",))] = b"new"
    tr[key(("added",))] = b"later"
    del tr[key(("cleared",))]
    tr.commit().wait()
    del db[key(("changed",)) : key(("same",))]  # clears "changed" and "cleared" once more
    then = [(key(("changed",)), b"old"), (key(("cleared",)), b"gone"), (key(("same",)), b"1")]
    begin, end = keyspace.range().start, keyspace.range().stop
    tr = db.create_transaction()
    tr.set_read_version(version)
    assert tr[key(("changed",))] == b"old"
    assert tr.snapshot[key(("cleared",))] == b"gone"
    assert not tr[key(("added",))].present()
    assert [(bytes(kv.key), bytes(kv.value)) for kv in tr.get_range(begin, end)] == then
    assert [bytes(kv.key) for kv in tr.snapshot.get_range(begin, end, reverse=True)] == [k for k, _ in then][::-1]
    assert tr.get_key(KeySelector.first_greater_than(key(("changed",)))).wait() == key(("cleared",))
    tr[key(("out",))] = b"x"
    assert error_code(lambda: tr.commit().wait()) == 1020


def test_a_value_read_at_an_older_version_too_large_to_write_back(db, keyspace):
    """The binding tester's api seed 4: the database is cleared, a transaction set to a version of
    before reads the range with a snapshot key-selector read and writes the rows, packed, as one
    value. On a cluster the rows are there, so the value is over 100,000 bytes: the later reads
    and the commit fail with the kept 2103 (an engine that refused the old read wrote its error)."""
    rows = {keyspace.pack(("row", i)): b"v" * 1000 for i in range(120)}
    for start in range(0, 120, 40):
        tr = db.create_transaction()
        for row_key, value in list(rows.items())[start : start + 40]:
            tr[row_key] = value
        tr.commit().wait()
    before = db.create_transaction()  # kept: a transaction gone cancels its futures (1025)
    version = before.get_read_version().wait()
    begin, end = keyspace.range().start, keyspace.range().stop
    del db[begin:end]
    tr = db.create_transaction()
    tr.set_read_version(version)
    found = tr.snapshot.get_range(
        KeySelector.first_greater_or_equal(begin), KeySelector.first_greater_or_equal(end), 585
    )
    packed = fdb.tuple.pack(tuple(part for kv in found for part in (bytes(kv.key), bytes(kv.value))))
    assert len(packed) > 100_000
    tr[keyspace.pack(("copy",))] = packed
    assert error_code(lambda: list(tr.get_range(begin, end, 10))) == 2103
    assert error_code(lambda: tr.commit().wait()) == 2103


def test_a_kept_error_comes_before_cancellation(db, keyspace):
    """A write over the limits on a cancelled transaction: its error, kept, fails the reads."""
    tr = db.create_transaction()
    tr.cancel()
    tr[keyspace.pack(("big",))] = b"v" * 100_001
    assert error_code(lambda: tr.get(keyspace.pack(("other",))).wait()) == 2103


@pytest.mark.parametrize("cancel_first", [True, False])
def test_a_kept_error_comes_before_cancellation_at_commit_too(db, keyspace, cancel_first):
    """The binding tester's api seed 36: its commit fails with the kept 2103, not 1025."""
    tr = db.create_transaction()
    if cancel_first:
        tr.cancel()
    tr[keyspace.pack(("big",))] = b"v" * 100_001
    if not cancel_first:
        tr.cancel()
    assert error_code(lambda: tr.commit().wait()) == 2103


def test_an_invalid_read_version_fails_the_reads(db, keyspace):
    """-1 (what ``get_committed_version`` gives before a commit) is no version: 2011."""
    tr = db.create_transaction()
    tr.set_read_version(-1)
    assert error_code(lambda: tr.get(keyspace.pack(("k",))).wait()) == 2011


def test_a_read_conflict_range_after_a_kept_error_does_not_fail(db, keyspace):
    tr = db.create_transaction()
    tr.get(keyspace.pack(("k",))).wait()
    tr.set_read_version(tr.get_read_version().wait())
    tr.add_read_conflict_key(keyspace.pack(("k",)))
    assert error_code(lambda: tr.get(keyspace.pack(("k",))).wait()) == 2010


def test_on_error_of_a_cancelled_transaction(db):
    tr = db.create_transaction()
    tr.cancel()
    assert error_code(lambda: tr.on_error(4770).wait()) == 1025


def test_clearing_the_tenant_map_needs_special_key_writes(db):
    """The binding tester's driver clears the tenant map before each test: refused (2114) until
    special key space writes are enabled, a module that is not there (2115) even then; like every
    write's error, it fails the reads after it and the commit."""
    begin, end = b"\xff\xff/management/tenant/map/", b"\xff\xff/management/tenant/map0"
    tr = db.create_transaction()
    tr.clear_range(begin, end)
    assert error_code(lambda: tr.get(b"a").wait()) == 2114
    assert error_code(lambda: tr.commit().wait()) == 2114
    tr = db.create_transaction()
    tr.options.set_special_key_space_enable_writes()
    tr.clear_range(b"\xff\xff/management/none", b"\xff\xff/management/none0")
    assert error_code(lambda: tr.commit().wait()) == 2115


def test_the_tuple_layer_is_the_bindings(db, keyspace):
    """Keys built with the binding's tuple layer read back through either engine unchanged."""
    key = keyspace.pack((fdb.tuple.SingleFloat(1.5), 2**70, "é"))
    db[key] = b"v"
    assert [bytes(kv.key) for kv in db.get_range(keyspace.range().start, keyspace.range().stop)] == [key]
