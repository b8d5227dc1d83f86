"""A hook that times the service's public operations and tells whoever listens.

The service must not depend on any metrics library (``prometheus-client`` is an optional extra),
yet operators want counts and latencies of pushes, pops and claims. So the service only calls
this hook; ``django_fdbqueue.metrics`` (or anything else: logging, tracing, a test) registers a
listener, a callable taking ``(operation, outcome, seconds)``.

With no listener registered, a decorated call costs one extra Python call and one truthiness
test of a module global: no clock is read and nothing is allocated. Listeners are kept in an
immutable tuple that is replaced (under a lock) when one is added or removed, so the hot path
reads it without locking.

``operation`` is the decorated function's name, with ``_wait`` appended when the call passed a
non-zero ``wait=`` (a blocking pop or claim would otherwise swamp the latency of the plain ones).
The thin aliases (``enqueue``, ``dequeue``, ``pop_min``, ``peek_max``, ...) are not decorated:
they call ``push``, ``pop`` or ``peek``, which report, so no call is counted twice.

``outcome`` is one of :data:`OUTCOMES`:

* ``ok``: returned normally;
* ``empty``: returned ``None`` where ``None`` means "nothing there" (a pop, claim or peek of an
  empty queue), for functions decorated with ``none_is_empty=True``;
* ``refused``: raised a :class:`~django_fdbqueue.exceptions.QueueError` (the caller's mistake or
  a state conflict: the REST API answers 4xx);
* ``fdb_error``: raised an ``FDBError`` (a timeout, the retry limit, a size limit, any error
  that is not retried: the REST API answers 503, or 413 for size limits);
* ``error``: raised any other ``Exception`` (a bug, or an unexpected failure of the store).
  ``KeyboardInterrupt`` and other ``BaseException`` subclasses pass through unreported.

``seconds`` is wall time of the whole call, including the retries of its transaction. Given an
open transaction, a function does not commit, so its time excludes the caller's commit.

A listener that raises is logged and otherwise ignored: metrics must never fail an operation.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any, Callable, TypeVar, overload

from django_fdbqueue.exceptions import QueueError
from django_fdbqueue.fdbapi import FDBError

__all__ = ["OUTCOMES", "Listener", "add_listener", "remove_listener", "listeners", "observed"]

logger = logging.getLogger("django_fdbqueue.service")

F = TypeVar("F", bound=Callable[..., Any])
#: ``listener(operation, outcome, seconds)``; called in the thread that ran the operation.
Listener = Callable[[str, str, float], None]

OK = "ok"
EMPTY = "empty"
REFUSED = "refused"
FDB_ERROR = "fdb_error"
ERROR = "error"
OUTCOMES = (OK, EMPTY, REFUSED, FDB_ERROR, ERROR)

_listeners: tuple[Listener, ...] = ()
_lock = threading.Lock()
# The clock, named here so that a test can prove it is not read when nobody listens.
_clock = time.perf_counter


def add_listener(listener: Listener) -> None:
    """Report every observed operation to ``listener`` from now on (once, however often added)."""
    global _listeners
    with _lock:
        if listener not in _listeners:
            _listeners = _listeners + (listener,)


def remove_listener(listener: Listener) -> None:
    """Stop reporting to ``listener``; unknown listeners are ignored."""
    global _listeners
    with _lock:
        _listeners = tuple(known for known in _listeners if known != listener)


def listeners() -> tuple[Listener, ...]:
    """The listeners registered now (a snapshot)."""
    return _listeners


def _report(operation: str, outcome: str, seconds: float) -> None:
    for listener in _listeners:
        try:
            listener(operation, outcome, seconds)
        except Exception:  # noqa: BLE001 - a broken listener must not break the operation
            logger.warning("Listener %r failed on %s/%s", listener, operation, outcome, exc_info=True)


@overload
def observed(func: F) -> F: ...


@overload
def observed(func: None = None, *, name: str | None = None, none_is_empty: bool = False) -> Callable[[F], F]: ...


def observed(func: F | None = None, *, name: str | None = None, none_is_empty: bool = False) -> F | Callable[[F], F]:
    """Decorate a service function so each call reports ``(operation, outcome, seconds)``.

    Use bare (``@observed``) or with options (``@observed(none_is_empty=True)`` for functions
    whose ``None`` result means an empty queue). ``name`` overrides the reported operation name.
    """

    def decorate(inner: F) -> F:
        operation = name or inner.__name__
        waiting = operation + "_wait"

        @functools.wraps(inner)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not _listeners:
                return inner(*args, **kwargs)
            reported = waiting if kwargs.get("wait") else operation
            started = _clock()
            try:
                result = inner(*args, **kwargs)
            except QueueError:
                _report(reported, REFUSED, _clock() - started)
                raise
            except FDBError:
                _report(reported, FDB_ERROR, _clock() - started)
                raise
            except Exception:
                _report(reported, ERROR, _clock() - started)
                raise
            outcome = EMPTY if none_is_empty and result is None else OK
            _report(reported, outcome, _clock() - started)
            return result

        return wrapper  # type: ignore[return-value]

    if func is not None:
        return decorate(func)
    return decorate
