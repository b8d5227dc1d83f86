"""The part of the FoundationDB Python API that both engines share.

Service code imports FoundationDB names from here and nowhere else, so it runs unchanged on
the real cluster (official binding) and on the embedded engine:

- ``fdb``: the official package, for its pure-Python tuple layer (``fdb.tuple``) and
  ``fdb.Subspace``; keys are therefore byte-identical on both engines.
- ``FDBError``: *one* exception type per process, with ``.code`` and ``.description``. When
  the FoundationDB client library can be loaded it is the binding's own ``fdb.FDBError``
  (the embedded engine raises it too); otherwise it is a pure-Python class of the same
  shape. Either way ``except FDBError`` catches errors from both engines.
- ``KeySelector``: the binding's class when the library loads (its ``get_range`` checks
  ``isinstance``), otherwise a twin with the same attributes and constructors.
- ``transactional``: a decorator that behaves like ``fdb.transactional`` on both engines.

It also defuses one trap of the 7.3 binding in one place: ``Versionstamp.to_bytes()`` (used
by ``fdb.tuple.pack_with_versionstamp``) refers to ``fdb.impl.Value``, and ``fdb.impl``
cannot be imported without the C library. See ``_defuse_versionstamp_trap``.
"""

from __future__ import annotations

import collections
import functools
import inspect
import threading
import time
import types
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeAlias, TypeVar, cast, overload

import fdb
import fdb.subspace_impl
import fdb.tuple

from django_fdbqueue import clientlib

__all__ = [
    "CLIENT_LIBRARY_AVAILABLE",
    "Database",
    "DatabaseOrTransaction",
    "ErrorCode",
    "FDBError",
    "KeySelector",
    "Subspace",
    "ReadTransaction",
    "Transaction",
    "describe",
    "fdb",
    "retry_counts",
    "attach_root",
    "root_of",
    "subspace_of",
    "bounded",
    "bounded_waits",
    "commit_in_doubt",
    "is_transaction",
    "latest_api_version",
    "wait_bound",
    "strinc",
    "transactional",
]

F = TypeVar("F", bound=Callable[..., Any])


class ErrorCode:
    """FoundationDB error codes this app raises, retries or maps (names as in FoundationDB)."""

    TRANSACTION_TOO_OLD = 1007
    FUTURE_VERSION = 1009
    NOT_COMMITTED = 1020
    COMMIT_UNKNOWN_RESULT = 1021
    TRANSACTION_CANCELLED = 1025
    TRANSACTION_TIMED_OUT = 1031
    TOO_MANY_WATCHES = 1032
    ACCESSED_UNREADABLE = 1036
    PROCESS_BEHIND = 1037
    DATABASE_LOCKED = 1038
    CLUSTER_VERSION_CHANGED = 1039
    OPERATION_CANCELLED = 1101
    CLIENT_INVALID_OPERATION = 2000
    KEY_OUTSIDE_LEGAL_RANGE = 2004
    INVERTED_RANGE = 2005
    USED_DURING_COMMIT = 2017
    NO_COMMIT_VERSION = 2021
    TRANSACTION_TOO_LARGE = 2101
    KEY_TOO_LARGE = 2102
    VALUE_TOO_LARGE = 2103


# Codes on which `Transaction.on_error` backs off and retries (FoundationDB's retryable set).
RETRYABLE_CODES = frozenset(
    {
        ErrorCode.TRANSACTION_TOO_OLD,
        ErrorCode.FUTURE_VERSION,
        ErrorCode.NOT_COMMITTED,
        ErrorCode.COMMIT_UNKNOWN_RESULT,
        ErrorCode.PROCESS_BEHIND,
        ErrorCode.DATABASE_LOCKED,
        1042,  # commit_proxy_memory_limit_exceeded
        1051,  # batch_transaction_throttled
        1078,  # grv_proxy_memory_limit_exceeded
        1213,  # tag_throttled
    }
)

# Codes after which a commit may or may not have happened: FoundationDB's "maybe committed" pair
# (1021, 1039), which `on_error` retries, and a timeout or cancellation, which can end the wait for
# a commit still in flight and reach the caller (1031 also from the wait bound, wait_bound.py).
IN_DOUBT_CODES = frozenset(
    {
        ErrorCode.COMMIT_UNKNOWN_RESULT,
        ErrorCode.CLUSTER_VERSION_CHANGED,
        ErrorCode.TRANSACTION_TIMED_OUT,
        ErrorCode.TRANSACTION_CANCELLED,
    }
)


def commit_in_doubt(error: BaseException) -> bool:
    """Does ``error``, raised by an operation that writes, leave unknown whether it committed?

    Then retry the same call: the service's operations answer a retry as if the first attempt
    had applied, or say what a blind retry costs (docs: errors, "Commits in doubt").
    """
    return getattr(error, "code", None) in IN_DOUBT_CODES


# Descriptions used when the client library (which owns the real texts) is not loaded.
_DESCRIPTIONS = {
    1007: "Transaction is too old to perform reads or be committed",
    1009: "Request for future version",
    1020: "Transaction not committed due to conflict with another transaction",
    1021: "Transaction may or may not have committed",
    1025: "Operation aborted because the transaction was cancelled",
    1031: "Operation aborted because the transaction timed out",
    1032: "Too many watches currently set",
    1036: "Read or wrote an unreadable key",
    1037: "Storage process does not have recent mutations",
    1038: "Database is locked",
    1039: "The protocol version of the cluster has changed",
    1101: "Asynchronous operation cancelled",
    2000: "Invalid API call",
    2004: "Key outside legal range",
    2005: "Range begin key larger than end key",
    2017: "Operation issued while a commit was outstanding",
    2021: "Transaction has no commit version",
    2101: "Transaction exceeds byte limit",
    2102: "Key length exceeds limit",
    2103: "Value length exceeds limit",
}


def _load_binding_impl() -> types.ModuleType | None:
    """Import the binding's C-backed module, or return None when libfdb_c is not installed."""
    try:
        import fdb.impl as impl
    except Exception:  # the binding raises a bare Exception when it cannot find the library
        return None
    return cast(types.ModuleType, impl)


clientlib.preload()  # FDBQUEUE['CLIENT_LIBRARY'], loaded before the binding looks for it by name
_impl = _load_binding_impl()
CLIENT_LIBRARY_AVAILABLE: bool = _impl is not None


class _PurePythonFDBError(Exception):
    """Stand-in for ``fdb.FDBError`` when the client library is absent: same attributes."""

    def __init__(self, code: int, description: str | None = None) -> None:
        super().__init__(code)
        self.code = code
        self._description = description

    @property
    def description(self) -> str:
        return self._description or _DESCRIPTIONS.get(self.code, "Unknown error")

    def __str__(self) -> str:
        return "%s (%d)" % (self.description, self.code)

    def __repr__(self) -> str:
        return "FDBError(%d)" % self.code


class _PurePythonKeySelector:
    """Stand-in for ``fdb.KeySelector``: the key, whether it is included, and an offset."""

    def __init__(self, key: bytes, or_equal: bool, offset: int) -> None:
        self.key = key
        self.or_equal = or_equal
        self.offset = offset

    def __add__(self, offset: int) -> "_PurePythonKeySelector":
        return type(self)(self.key, self.or_equal, self.offset + offset)

    def __sub__(self, offset: int) -> "_PurePythonKeySelector":
        return type(self)(self.key, self.or_equal, self.offset - offset)

    @classmethod
    def last_less_than(cls, key: bytes) -> "_PurePythonKeySelector":
        return cls(key, False, 0)

    @classmethod
    def last_less_or_equal(cls, key: bytes) -> "_PurePythonKeySelector":
        return cls(key, True, 0)

    @classmethod
    def first_greater_than(cls, key: bytes) -> "_PurePythonKeySelector":
        return cls(key, True, 1)

    @classmethod
    def first_greater_or_equal(cls, key: bytes) -> "_PurePythonKeySelector":
        return cls(key, False, 1)

    def __repr__(self) -> str:
        return "KeySelector(%r, %r, %r)" % (self.key, self.or_equal, self.offset)


if TYPE_CHECKING:  # what type checkers see: the stand-ins have the binding's attributes
    FDBError = _PurePythonFDBError
    KeySelector = _PurePythonKeySelector
elif _impl is not None:
    FDBError = _impl.FDBError
    KeySelector = _impl.KeySelector
else:
    FDBError = _PurePythonFDBError
    KeySelector = _PurePythonKeySelector


def make_error(code: int) -> Exception:
    """Build the process's one FDBError type for `code` (used by the embedded engine).

    The binding's FDBError asks the C library for its description, which only works once an
    API version is selected; until then (the embedded engine on a machine that also has the
    client library) we give it ours.
    """
    error = FDBError(code)
    if _impl is not None and not fdb.is_api_version_selected():
        error._description = _DESCRIPTIONS.get(code, "Unknown error")
    return error


def describe(error: BaseException) -> str:
    """FoundationDB's text for `error`, always as ``str``.

    The binding's ``FDBError.description`` comes from the C library as ``bytes`` (and needs an
    API version selected); messages shown to people should use this instead.
    """
    try:
        text: Any = error.description  # type: ignore[attr-defined]
    except Exception:  # no description attribute, or the C library could not be asked
        text = None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text:
        text = _DESCRIPTIONS.get(getattr(error, "code", None), str(error))  # type: ignore[arg-type]
    return cast(str, text)


def _defuse_versionstamp_trap() -> None:
    """Let ``fdb.tuple.pack_with_versionstamp`` run without the C library.

    ``Versionstamp.to_bytes()`` asks ``isinstance(tr_version, fdb.impl.Value)``, only to unwrap
    a future that the real binding may hand it. Without the library ``fdb.impl`` cannot exist,
    so the attribute lookup fails. We give the package an ``impl`` attribute whose ``Value`` no
    object is an instance of: the check is then simply false, as it is for every plain bytes
    value. ``import fdb.impl`` still fails loudly (the placeholder is not in ``sys.modules``), so
    the real engine's "install the client library" error is unaffected.
    """
    if _impl is None and not hasattr(fdb, "impl"):

        class _NoFutureValue:
            """Nothing is an instance of this: there are no binding futures without the library."""

        fdb.impl = types.SimpleNamespace(Value=_NoFutureValue)


_defuse_versionstamp_trap()

# `fdb.Subspace` is only published by `fdb.api_version()`; the class itself is pure Python.
Subspace = fdb.subspace_impl.Subspace
if not hasattr(fdb, "Subspace"):
    fdb.Subspace = Subspace  # type: ignore[misc]


#: The 7.1 binding's API version: the fallback for bindings that do not publish their latest one.
_BINDING_FALLBACK_API_VERSION = 710


def latest_api_version() -> int:
    """The newest API version the installed binding accepts (730 for the 7.3 binding).

    Pure Python (the package's constant): settings are checked against it without the C library.
    """
    return int(getattr(fdb, "LATEST_API_VERSION", _BINDING_FALLBACK_API_VERSION))


def strinc(key: bytes) -> bytes:
    """The first key after every key that starts with `key` (FoundationDB's ``strinc``)."""
    stripped = key.rstrip(b"\xff")
    if not stripped:
        raise ValueError("Key must contain at least one byte not equal to 0xFF.")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def is_transaction(obj: Any) -> bool:
    """True for an open transaction (or snapshot view) of either engine, False for a database.

    Databases and tenants of both engines create transactions; transactions do not.
    """
    return not hasattr(obj, "create_transaction")


# -- what the service is handed: a database or a transaction, of either engine ----------------
#
# Structural types, so that the service names them without importing an engine: the binding's
# fdb.Database and fdb.Transaction (untyped, so any of their objects fits) and the embedded
# engine's EmbeddedDatabase and Transaction (checked by mypy, tests/test_types.py) all fit. They
# list what the service uses of FoundationDB's API; results are the engines' futures, so ``Any``.


class ReadTransaction(Protocol):
    """The reads of a transaction, also offered by its ``snapshot`` view (no read conflicts)."""

    def get(self, key: bytes) -> Any: ...

    def get_key(self, key_selector: Any) -> Any: ...

    def get_range(
        self, begin: Any, end: Any, limit: int = 0, reverse: bool = False, streaming_mode: Any = None
    ) -> Any: ...

    def get_range_startswith(self, prefix: bytes, *args: Any, **kwargs: Any) -> Any: ...

    def get_read_version(self) -> Any: ...

    def __getitem__(self, key: Any) -> Any: ...


class Transaction(ReadTransaction, Protocol):
    """An open transaction of either engine: a service function given one joins it, and does not
    commit."""

    @property
    def snapshot(self) -> ReadTransaction: ...

    @property
    def options(self) -> Any: ...

    def set(self, key: bytes, value: bytes) -> None: ...

    def __setitem__(self, key: bytes, value: bytes) -> None: ...

    def __delitem__(self, key: Any) -> None: ...

    def clear(self, key: bytes) -> None: ...

    def clear_range(self, begin: Any, end: Any) -> None: ...

    def add(self, key: bytes, param: bytes) -> None: ...

    def max(self, key: bytes, param: bytes) -> None: ...

    def min(self, key: bytes, param: bytes) -> None: ...

    def compare_and_clear(self, key: bytes, param: bytes) -> None: ...

    def set_versionstamped_key(self, key: bytes, value: bytes) -> None: ...

    def set_versionstamped_value(self, key: bytes, value: bytes) -> None: ...

    def add_read_conflict_key(self, key: bytes) -> None: ...

    def add_read_conflict_range(self, begin: bytes, end: bytes) -> None: ...

    def add_write_conflict_key(self, key: bytes) -> None: ...

    def add_write_conflict_range(self, begin: bytes, end: bytes) -> None: ...

    def watch(self, key: bytes) -> Any: ...

    def get_versionstamp(self) -> Any: ...

    def get_committed_version(self) -> int: ...

    def commit(self) -> Any: ...

    def on_error(self, error: Any) -> Any: ...

    def reset(self) -> None: ...


class Database(Protocol):
    """A database handle of either engine (or a tenant of one): a service function given one runs
    in a transaction of its own, retried on conflicts."""

    def create_transaction(self) -> Transaction: ...

    def __delitem__(self, key: Any) -> None: ...


#: What every service function takes first (see ``is_transaction`` for telling them apart).
DatabaseOrTransaction: TypeAlias = Database | Transaction


# -- the root subspace a handle was opened for -------------------------------------------------
#
# The app keeps every key under FDBQUEUE['ROOT']. The code that opens a handle (the engines) records
# that root on it, and the service reads it back from what it is given, a database or a transaction
# of one, so the service never asks where its handle came from. Each handle the engines open is its
# own object (the foundationdb engine does not use the handle ``fdb.open`` shares per cluster file),
# so two stores on one cluster under different ROOTs never see each other's root.

_ROOT_ATTRIBUTE = "fdbqueue_root"


@functools.lru_cache(maxsize=64)
def subspace_of(root: tuple[Any, ...]) -> Any:
    """The ``Subspace`` of a ROOT tuple, made once per value (every operation asks for it)."""
    return Subspace(root)


def attach_root(database: Any, root: tuple[Any, ...]) -> None:
    """Record on ``database`` that the app's keys live under ``root`` there."""
    setattr(database, _ROOT_ATTRIBUTE, subspace_of(root))


def root_of(db_or_tr: Any) -> Any:
    """The root subspace attached to this database, or to the database of this transaction.

    None for a handle the engines did not open (a project's own ``fdb.open()``, a tenant): the
    caller then decides (the service uses the configured ROOT).
    """
    handle = getattr(db_or_tr, "db", None) if is_transaction(db_or_tr) else db_or_tr
    return getattr(handle, _ROOT_ATTRIBUTE, None)


# Errors that ``transactional`` handed to ``on_error`` in this process, by code: the conflict and
# retry rate the benchmark reports (and what metrics will export). Counting is cheap and lock-free
# enough under a lock that is held for one increment.
_retries: collections.Counter[int] = collections.Counter()
_retries_lock = threading.Lock()


def retry_counts() -> dict[int, int]:
    """How many times ``transactional`` retried, by FoundationDB error code, since the process began."""
    with _retries_lock:
        return dict(_retries)


def _count_retry(code: int) -> None:
    with _retries_lock:
        _retries[code] += 1


# -- a bound on this thread's blocking waits (see engines/wait_bound.py) -------------------------------
_wait_scope = threading.local()


def wait_bound() -> float | None:
    """Seconds a blocking wait on a future may last in this thread's current operation, or None.

    Set by :class:`bounded_waits` around operations that open their own transactions on a database
    with a ``wait_bound`` attribute (the ``foundationdb`` engine's, when TIMEOUT is set). Outside such
    an operation, and on the embedded engine, waits are FoundationDB's own business.
    """
    return getattr(_wait_scope, "seconds", None)


class bounded_waits:
    """A block in which this thread's blocking waits are bounded by ``db.wait_bound`` seconds.

    A transaction (or a database without the attribute) changes nothing: an operation joining a
    caller's transaction keeps the caller's bound, if any.
    """

    __slots__ = ("seconds", "outer")

    def __init__(self, db: Any) -> None:
        self.seconds: float | None = getattr(db, "wait_bound", None)
        self.outer: float | None = None

    def __enter__(self) -> None:
        if self.seconds is not None:
            self.outer = getattr(_wait_scope, "seconds", None)
            _wait_scope.seconds = self.seconds

    def __exit__(self, *exc: object) -> None:
        if self.seconds is not None:
            _wait_scope.seconds = self.outer


def bounded(func: F) -> F:
    """Run ``func(db, ...)`` inside :class:`bounded_waits` for its first argument."""

    @functools.wraps(func)
    def wrapper(db: Any, *args: Any, **kwargs: Any) -> Any:
        with bounded_waits(db):
            return func(db, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


# -- read versions reused from this thread's last commit -----------------------------------------
#
# A transaction's first round trip fetches a read version. A transaction that writes does not need
# the newest one to be correct: the cluster checks its reads for conflicts from its read version up
# to its commit, so a read version a little old only widens that window. The version of this
# thread's own last commit is such a version, and it sees everything this thread wrote. So, on a
# database that allows it (``reuse_read_versions``, the foundationdb engine), a function decorated
# with ``transactional(trusts=...)`` starts from that version, no older than
# REUSE_VERSION_SECONDS, and skips the round trip. What a transaction concludes from *absence*
# (an empty queue: a read-only transaction, so never checked for conflicts at commit) could be
# out of date, so ``trusts(result)`` says whether the result stands; when it does not, the
# attempt is run again on a fresh read version. After a retryable error the next attempt and the
# thread's next transaction fetch fresh ones (contention: a stale version would only conflict again).
#
# The rule this keeps: an operation that finished before another began is visible to it, whatever
# client ran it. Another client's commit after the reused version is seen only through conflicts,
# so it holds for ordinary reads alone; snapshot reads have no such guard. So the reads a pop or
# claim chooses its item by go through ``choice_reads``: ordinary ones at a reused version, snapshot
# reads (fewer conflicts between consumers) at a fresh one. Writers that commit outside
# ``transactional`` call ``remember_commit``, so the thread's next claim sees what they wrote.

REUSE_VERSION_SECONDS = 1.0
_last_commit = threading.local()
_attempt = threading.local()  # .tr: the transaction whose current attempt runs at a reused version


def _reuse_version(target: Any, tr: Any) -> bool:
    """Start ``tr`` from this thread's last commit on ``target`` when it is recent; did it?"""
    last = getattr(_last_commit, "seen", None)
    if last is None or last[0] is not target or time.monotonic() - last[2] > REUSE_VERSION_SECONDS:
        return False
    tr.set_read_version(last[1])
    return True


def at_reused_version(tr: Any) -> bool:
    """Does this attempt of ``tr`` read at a reused version, with nothing vouched for yet?"""
    return getattr(_attempt, "tr", None) is tr


def choice_reads(tr: Any) -> Any:
    """What a pop or claim reads to choose its item through.

    Snapshot reads keep consumers that choose different items from conflicting, and at a fresh
    read version they see everything that finished before the transaction began. A reused
    version may be older than such a commit: then only read conflicts make the transaction see
    it (it fails and runs again at a fresh version), so the reads are ordinary ones.
    """
    return tr if at_reused_version(tr) else tr.snapshot


def vouch(tr: Any) -> None:
    """The attempt's outcome stands from here on (say, a claim's item is taken): an exception
    raised after this is the caller's own, not a sign of a stale version, and is not retried."""
    if at_reused_version(tr):
        _attempt.tr = None


class _Untrusted(Exception):
    """A result that a reused read version cannot vouch for (see ``transactional``'s ``trusts``)."""


def _remember_commit(target: Any, tr: Any) -> None:
    version = tr.get_committed_version()  # -1 for a read-only commit: nothing to reuse
    _last_commit.seen = (target, version, time.monotonic()) if version > 0 else None


def remember_commit(target: Any, tr: Any) -> None:
    """After ``tr`` committed on ``target`` outside ``transactional``: the thread's next pop or
    claim may start from its version (which sees what it wrote)."""
    if getattr(target, "reuse_read_versions", False):
        _remember_commit(target, tr)


def _run_retrying(target: Any, tr: Any, call: Callable[[], Any], trusts: Callable[[Any], bool] | None) -> Any:
    """The retry loop of a transactional function that owns its transaction ``tr`` on ``target``."""
    reuses = getattr(target, "reuse_read_versions", False)
    outer = getattr(_attempt, "tr", None)  # a transaction this thread is inside of, on another call
    with bounded_waits(target):
        reused = trusts is not None and reuses and _reuse_version(target, tr)
        try:
            while True:
                _attempt.tr = tr if reused else None
                try:
                    result = call()
                    if reused and not trusts(result):  # type: ignore[misc]
                        raise _Untrusted
                    tr.commit().wait()
                    if reuses:
                        _remember_commit(target, tr)
                    return result
                except FDBError as error:
                    reused = False
                    _last_commit.seen = None
                    _count_retry(error.code)
                    tr.on_error(error).wait()
                except Exception:
                    # Found nothing, or no such queue, at a reused version: only a fresh read
                    # version may conclude that (the queue may be newer than the version). An
                    # exception raised after ``vouch`` is the caller's own: it is not run again.
                    if not at_reused_version(tr):
                        raise
                    reused = False
                    tr.reset()
        finally:
            _attempt.tr = outer


@overload
def transactional(func: F, *, parameter: str = "tr", trusts: Callable[[Any], bool] | None = None) -> F: ...


@overload
def transactional(
    func: None = None, *, parameter: str = "tr", trusts: Callable[[Any], bool] | None = None
) -> Callable[[F], F]: ...


def transactional(
    func: F | None = None, *, parameter: str = "tr", trusts: Callable[[Any], bool] | None = None
) -> F | Callable[[F], F]:
    """Decorate `func` like ``fdb.transactional``, for both engines.

    Called with a database, the wrapper opens a transaction, runs `func`, commits, and on an
    ``FDBError`` asks ``tr.on_error`` whether to retry (it backs off and resets the
    transaction) or re-raises. Called with a transaction, it calls straight through and does
    not commit, so transactional functions compose into one atomic transaction.

    ``trusts`` (a predicate on the result) lets the function start from a reused read version
    where the database allows it: see the section above.
    """

    def decorate(inner: F) -> F:
        if inspect.isgeneratorfunction(inner):
            raise ValueError("Generators can not be wrapped with transactional")
        unwrapped = inspect.unwrap(inner)
        try:
            index = inspect.getfullargspec(unwrapped).args.index(parameter)
        except ValueError:
            raise TypeError(
                "%s has no parameter named %r for the database or transaction" % (inner.__qualname__, parameter)
            ) from None

        @functools.wraps(inner)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if parameter in kwargs:
                target = kwargs[parameter]
            else:
                target = args[index]
            if is_transaction(target):
                return inner(*args, **kwargs)
            tr = target.create_transaction()
            if parameter in kwargs:
                kwargs[parameter] = tr
            else:
                args = args[:index] + (tr,) + args[index + 1 :]
            return _run_retrying(target, tr, lambda: inner(*args, **kwargs), trusts)

        return wrapper  # type: ignore[return-value]

    if func is not None:
        return decorate(func)
    return decorate
