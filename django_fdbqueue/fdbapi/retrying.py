"""``transactional``: the retry loop on both engines, with retries counted and read versions reused."""

from __future__ import annotations

import collections
import functools
import inspect
import threading
import time
from typing import Any, Callable, TypeVar, overload

from .binding import is_transaction
from .errors import FDBError
from .waits import bounded_waits

F = TypeVar("F", bound=Callable[..., Any])

# Errors that ``transactional`` handed to ``on_error`` in this process, by code: the conflict and
# retry rate the benchmark reports (and what metrics will export). Counting is cheap and lock-free
# enough under a lock that is held for one increment.
_retries: collections.Counter[int] = collections.Counter()
_retries_lock = threading.Lock()


def retry_counts() -> dict[int, int]:
    """How many times ``transactional`` retried, by FoundationDB error code, since the process began."""
    with _retries_lock:
        return dict(_retries)


def count_retry(code: int) -> None:
    """Count one retry after ``code`` (the metrics read :func:`retry_counts`)."""
    with _retries_lock:
        _retries[code] += 1


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
                    count_retry(error.code)
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
