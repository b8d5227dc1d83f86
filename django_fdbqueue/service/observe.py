"""A hook that times the service's public operations and tells whoever listens.

The service must not depend on any metrics library (``prometheus-client`` is an optional extra),
so it only calls this hook, which costs next to nothing while nobody listens: each public
operation is decorated with :func:`observed`, and ``django_fdbqueue.metrics`` (or a log, a
tracer, a test) registers a listener with :func:`add_listener`, called as ``listener(operation,
outcome, seconds)``.

What the arguments mean, what the hook costs and how a listener's failure is handled: the metrics
guide, "Count operations without Prometheus" (docs/howto/metrics.md); the operation names and
:data:`OUTCOMES` are listed in docs/reference/names.md.
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
