"""The shared FoundationDB API layer (django_fdbqueue.fdbapi): transactional, FDBError, KeySelector, strinc,
and the versionstamp trap of the 7.3 binding.

The decorator is exercised on the embedded engine (the real cluster runs it through the
conformance suite); the versionstamp trap is checked in fresh interpreters, because importing
django_fdbqueue.fdbapi once fixes it for the whole test process.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from django_fdbqueue import fdbapi
from django_fdbqueue.fdbapi import FDBError, KeySelector, fdb, transactional

REPO_ROOT = Path(__file__).resolve().parents[1]
WAIT = 60.0
SPACE = fdb.Subspace(("fdbapi-test",))


def key(*parts: Any) -> bytes:
    return SPACE.pack(parts)


# --------------------------------------------------------------------------- transactional


def test_transactional_with_a_database_commits_and_returns_the_result(embedded_db):
    """Given a database, @transactional opens a transaction, runs the body, commits, returns its result."""
    seen = []

    @transactional
    def write(tr, value: bytes) -> str:
        seen.append(tr)
        tr[key("a")] = value
        return "done"

    assert write(embedded_db, b"1") == "done"
    assert embedded_db[key("a")] == b"1"
    assert len(seen) == 1
    assert fdbapi.is_transaction(seen[0])


def test_transactional_retries_a_retryable_error_with_a_fresh_transaction(embedded_db):
    """An FDBError 1020 from the body is retried via on_error; the failed attempt's writes are dropped."""
    attempts = 0

    @transactional
    def flaky(tr) -> int:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            tr[key("from-failed-attempt")] = b"x"
            raise FDBError(1020)
        tr[key("ok")] = b"y"
        return attempts

    assert flaky(embedded_db) == 2
    assert embedded_db[key("from-failed-attempt")] is None
    assert embedded_db[key("ok")] == b"y"


@pytest.mark.parametrize("code", [1007, 1020, 1021])
def test_transactional_retries_each_retryable_code(embedded_db, code):
    """1007, 1020 and 1021 raised by the body are all retried until the body succeeds."""
    attempts = 0

    @transactional
    def flaky(tr) -> None:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise FDBError(code)

    flaky(embedded_db)
    assert attempts == 3


def test_transactional_reraises_a_non_retryable_fdb_error_without_retrying(embedded_db):
    """A non-retryable FDBError (2103) propagates after one attempt; nothing is committed."""
    attempts = 0

    @transactional
    def too_big(tr) -> None:
        nonlocal attempts
        attempts += 1
        tr[key("a")] = b"x"
        raise FDBError(2103)

    with pytest.raises(FDBError) as info:
        too_big(embedded_db)
    assert info.value.code == 2103
    assert attempts == 1
    assert embedded_db[key("a")] is None


def test_transactional_lets_other_exceptions_through_without_commit(embedded_db):
    """A non-FDB exception ends the call at once: no retry, no commit."""
    attempts = 0

    @transactional
    def broken(tr) -> None:
        nonlocal attempts
        attempts += 1
        tr[key("a")] = b"x"
        raise KeyError("boom")

    with pytest.raises(KeyError):
        broken(embedded_db)
    assert attempts == 1
    assert embedded_db[key("a")] is None


def test_transactional_with_a_transaction_calls_through_without_commit(embedded_db):
    """Given a transaction, the body runs once in it and nothing is committed until the caller commits."""

    @transactional
    def write(tr) -> str:
        tr[key("a")] = b"x"
        return "ran"

    tr = embedded_db.create_transaction()
    assert write(tr) == "ran"
    assert tr[key("a")] == b"x"
    assert embedded_db[key("a")] is None, "the decorator must not commit a caller's transaction"
    tr.commit().wait()
    assert embedded_db[key("a")] == b"x"


def test_transactional_with_a_transaction_does_not_retry(embedded_db):
    """Given a transaction, even a retryable FDBError propagates to the caller (who owns the retry loop)."""
    attempts = 0

    @transactional
    def conflicting(tr) -> None:
        nonlocal attempts
        attempts += 1
        raise FDBError(1020)

    tr = embedded_db.create_transaction()
    with pytest.raises(FDBError) as info:
        conflicting(tr)
    assert info.value.code == 1020
    assert attempts == 1


def test_transactional_functions_compose_into_one_atomic_transaction(embedded_db):
    """Inner transactional calls join the outer transaction: all of it commits or none of it."""

    @transactional
    def put(tr, name: str) -> None:
        tr[key(name)] = b"1"

    @transactional
    def both_then_fail(tr) -> None:
        put(tr, "first")
        put(tr, "second")
        raise ValueError("abort after both")

    @transactional
    def both(tr) -> None:
        put(tr, "first")
        put(tr, "second")

    with pytest.raises(ValueError):
        both_then_fail(embedded_db)
    assert embedded_db[key("first")] is None
    assert embedded_db[key("second")] is None
    both(embedded_db)
    assert embedded_db[key("first")] == b"1"
    assert embedded_db[key("second")] == b"1"


def test_transactional_finds_tr_by_name_in_methods(embedded_db):
    """The transaction argument is found by its name ("tr"), not position: methods work."""

    class Store:
        @transactional
        def put(self, tr, value: bytes) -> None:
            tr[key("m")] = value

    Store().put(embedded_db, b"v")
    assert embedded_db[key("m")] == b"v"


def test_transactional_parameter_names_another_argument(embedded_db):
    """transactional(parameter="db_or_tr") uses that argument, as fdb.transactional does."""

    @transactional(parameter="db_or_tr")
    def put(name: str, db_or_tr) -> None:
        db_or_tr[key(name)] = b"v"

    put("p", embedded_db)
    assert embedded_db[key("p")] == b"v"


def test_transactional_rejects_generators(embedded_db):
    """Generators cannot be transactional (the retry loop could not rerun them)."""

    def rows(tr):
        yield from tr.get_range(key("a"), key("z"))

    with pytest.raises(ValueError):
        transactional(rows)(embedded_db)


def test_transactional_preserves_the_function_name():
    """The wrapper keeps the wrapped function's name and docstring (functools.wraps)."""

    @transactional
    def documented(tr) -> None:
        """Docstring."""

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Docstring."


def test_is_transaction_tells_databases_from_transactions(embedded_db):
    """is_transaction: False for a database, True for a transaction and its snapshot view."""
    tr = embedded_db.create_transaction()
    assert not fdbapi.is_transaction(embedded_db)
    assert fdbapi.is_transaction(tr)
    assert fdbapi.is_transaction(tr.snapshot)


# --------------------------------------------------------------------------- wait bounds


class _BoundedDatabase:
    """A database as the foundationdb engine leaves it: ``wait_bound`` set; its waits recorded."""

    def __init__(self, real: Any, seconds: float | None) -> None:
        self.real = real
        self.wait_bound = seconds
        self.seen: list[float | None] = []

    def create_transaction(self) -> Any:
        return self.real.create_transaction()


def test_transactional_bounds_the_waits_of_its_own_transaction_by_the_databases_bound(embedded_db):
    """The bound applies inside an operation on a database that has one, for every wait of it
    (reads, commit, on_error), nested operations keep it, and it is gone afterwards."""
    db = _BoundedDatabase(embedded_db, 7.0)

    @transactional
    def inner(tr):
        db.seen.append(fdbapi.wait_bound())

    @transactional
    def outer(tr):
        db.seen.append(fdbapi.wait_bound())
        inner(tr)  # joins the transaction: same bound
        with fdbapi.bounded_waits(tr):  # a transaction has no bound of its own: no change
            db.seen.append(fdbapi.wait_bound())

    assert fdbapi.wait_bound() is None
    outer(db)
    assert db.seen == [7.0, 7.0, 7.0] and fdbapi.wait_bound() is None
    transactional(lambda tr: db.seen.append(fdbapi.wait_bound()))(embedded_db)  # no bound: none
    assert db.seen[-1] is None


def test_a_bounded_operation_restores_the_outer_bound_even_when_it_raises(embedded_db):
    seen = []

    @fdbapi.bounded
    def failing(db):
        seen.append(fdbapi.wait_bound())
        raise ValueError("boom")

    with fdbapi.bounded_waits(_BoundedDatabase(embedded_db, 10.0)):
        with pytest.raises(ValueError):
            failing(_BoundedDatabase(embedded_db, 3.0))
        assert fdbapi.wait_bound() == 10.0
    assert seen == [3.0] and fdbapi.wait_bound() is None


def test_the_wait_bound_is_timeout_plus_a_grace_as_long_and_at_least_five_seconds():
    from django_fdbqueue.engines.wait_bound import bound_for

    assert bound_for(None) is None
    assert (bound_for(2), bound_for(5), bound_for(20)) == (7, 10, 40)


# --------------------------------------------------------------------------- FDBError


DOCUMENTED = {
    1007: "Transaction is too old to perform reads or be committed",
    1020: "Transaction not committed due to conflict with another transaction",
    1021: "Transaction may or may not have committed",
    1031: "Operation aborted because the transaction timed out",
    2101: "Transaction exceeds byte limit",
    2102: "Key length exceeds limit",
    2103: "Value length exceeds limit",
}


@pytest.mark.parametrize("code", sorted(DOCUMENTED))
def test_describe_gives_foundationdb_text_as_str_on_either_error_type(code):
    """describe(): the error's text as str, whether FDBError is the binding's (bytes) or ours."""
    assert fdbapi.describe(fdbapi.make_error(code)) == DOCUMENTED[code]


def test_describe_decodes_the_bindings_bytes_description():
    class BindingStyleError(Exception):
        code = 1020
        description = b"Transaction not committed due to conflict with another transaction"

    assert fdbapi.describe(BindingStyleError()) == DOCUMENTED[1020]


@pytest.mark.skipif(fdbapi.CLIENT_LIBRARY_AVAILABLE, reason="the C library's FDBError describes itself")
@pytest.mark.parametrize("code", sorted(DOCUMENTED))
def test_fdb_error_has_code_description_and_binding_str(code):
    """Without the C library, FDBError(code) has .code, .description and str 'description (code)'."""
    error = FDBError(code)
    assert isinstance(error, Exception)
    assert error.code == code
    assert error.description == DOCUMENTED[code]
    assert str(error) == "%s (%d)" % (DOCUMENTED[code], code)
    assert repr(error) == "FDBError(%d)" % code


def test_fdb_error_is_raised_and_caught_as_one_type(embedded_db):
    """Errors raised by the engine are instances of fdbapi.FDBError (one type to catch)."""
    tr = embedded_db.create_transaction()
    tr[key("big")] = b"x" * 100_001
    with pytest.raises(FDBError) as info:
        tr.commit().wait()
    assert type(info.value) is FDBError
    assert info.value.code == 2103


def test_fdb_error_is_the_binding_class_when_the_client_library_loads():
    """With libfdb_c present FDBError is fdb.impl.FDBError, so both engines raise the same class."""
    if not fdbapi.CLIENT_LIBRARY_AVAILABLE:
        pytest.skip("the FoundationDB client library is not installed here")
    import fdb.impl

    assert FDBError is fdb.impl.FDBError
    assert KeySelector is fdb.impl.KeySelector


# --------------------------------------------------------------------------- KeySelector and strinc


def test_key_selector_constructors_match_the_binding():
    """The four constructors build (key, or_equal, offset) exactly as the binding does; +/- move offset."""
    cases = {
        "last_less_than": (False, 0),
        "last_less_or_equal": (True, 0),
        "first_greater_than": (True, 1),
        "first_greater_or_equal": (False, 1),
    }
    for name, (or_equal, offset) in cases.items():
        selector = getattr(KeySelector, name)(b"k")
        assert (selector.key, selector.or_equal, selector.offset) == (b"k", or_equal, offset)
    moved = KeySelector.first_greater_or_equal(b"k") + 3
    assert (moved.key, moved.or_equal, moved.offset) == (b"k", False, 4)
    moved = KeySelector.last_less_than(b"k") - 2
    assert (moved.key, moved.or_equal, moved.offset) == (b"k", False, -2)
    assert KeySelector(b"k", True, 5).offset == 5


def test_strinc_gives_the_first_key_after_a_prefix():
    """strinc(p) is the first key not starting with p: trailing 0xff bytes are dropped first."""
    assert fdbapi.strinc(b"a") == b"b"
    assert fdbapi.strinc(b"a\xff\xff") == b"b"
    assert fdbapi.strinc(b"\x00") == b"\x01"
    assert fdbapi.strinc(b"ab\xfe") == b"ab\xff"
    with pytest.raises(ValueError):
        fdbapi.strinc(b"\xff\xff")
    with pytest.raises(ValueError):
        fdbapi.strinc(b"")


def test_fdb_subspace_is_available_without_api_version():
    """fdb.Subspace is usable through fdbapi without fdb.api_version() (which needs the C library)."""
    space = fdb.Subspace(("q",))
    assert space.pack((1,)) == fdb.tuple.pack(("q", 1))
    assert space.unpack(space.pack(("x", 2))) == ("x", 2)


# --------------------------------------------------------------------------- the versionstamp trap


def run_python(code: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with the repository importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=str(REPO_ROOT),
        env=env,
    )


def test_importing_fdbapi_makes_versionstamp_packing_work_without_the_c_library():
    """After `import django_fdbqueue.fdbapi`, pack_with_versionstamp and complete-stamp pack/unpack work."""
    result = run_python(
        """
        import struct
        import django_fdbqueue.fdbapi
        from django_fdbqueue.fdbapi import fdb
        V = fdb.tuple.Versionstamp

        packed = fdb.tuple.pack_with_versionstamp(("a", V.incomplete(3)))
        expected_body = b"\\x02a\\x00" + b"\\x33" + b"\\xff" * 10 + b"\\x00\\x03"
        assert packed == expected_body + struct.pack("<I", 4), packed

        prefixed = fdb.Subspace(("s",)).pack_with_versionstamp((V(),))
        head = fdb.tuple.pack(("s",))
        assert prefixed == head + b"\\x33" + b"\\xff" * 10 + b"\\x00\\x00" + struct.pack("<I", len(head) + 1)

        complete = V(b"0123456789", 7)
        assert complete.to_bytes() == b"0123456789\\x00\\x07"
        assert fdb.tuple.unpack(fdb.tuple.pack(("x", complete))) == ("x", complete)
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_trap_is_real_in_the_raw_binding_without_the_c_library():
    """Without fdbapi's fix, the raw binding fails packing a versionstamp (fdb.impl cannot load)."""
    if fdbapi.CLIENT_LIBRARY_AVAILABLE:
        pytest.skip("the FoundationDB client library is installed: the trap cannot show")
    result = run_python(
        """
        import fdb.tuple
        fdb.tuple.pack_with_versionstamp((fdb.tuple.Versionstamp(),))
        """
    )
    assert result.returncode != 0
    assert "impl" in result.stderr


def test_the_fix_does_not_hide_the_missing_client_library():
    """After the fix, `import fdb.impl` still fails loudly without the C library (no fake module)."""
    if fdbapi.CLIENT_LIBRARY_AVAILABLE:
        pytest.skip("the FoundationDB client library is installed")
    result = run_python(
        """
        import django_fdbqueue.fdbapi
        try:
            import fdb.impl
        except Exception:
            print("fails")
        else:
            print("imported")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "fails"


def test_versionstamp_from_get_versionstamp_packs_in_this_process(embedded_db):
    """A stamp returned by the engine can be put into a complete Versionstamp and packed."""
    tr = embedded_db.create_transaction()
    tr[key("a")] = b"x"
    future = tr.get_versionstamp()
    tr.commit().wait()
    stamp = bytes(future.wait())
    packed = fdb.tuple.pack((fdb.tuple.Versionstamp(stamp, 1),))
    assert packed == b"\x33" + stamp + struct.pack(">H", 1)


def test_engine_errors_carry_a_description_while_no_api_version_is_selected(monkeypatch):
    """With libfdb_c loaded but unselected, the binding's FDBError cannot describe itself: we do."""

    class BindingStyleError(Exception):
        """Shaped like fdb.impl.FDBError: the description comes from the C library on demand."""

        def __init__(self, code):
            self.code = code
            self._description = None

        @property
        def description(self):
            if not self._description:
                raise AssertionError("asked the C library before fdb.api_version()")
            return self._description

    monkeypatch.setattr(fdbapi.binding, "impl", object())
    monkeypatch.setattr(fdbapi.errors, "FDBError", BindingStyleError)
    # The state under test, whatever this process did before (a cluster run selects a version).
    monkeypatch.setattr(fdbapi.fdb, "is_api_version_selected", lambda: False)
    error = fdbapi.make_error(1020)
    assert isinstance(error, BindingStyleError)
    assert error.code == 1020
    assert error.description == "Transaction not committed due to conflict with another transaction"
