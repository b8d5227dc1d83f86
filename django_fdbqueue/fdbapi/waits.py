"""A bound on this thread's blocking waits, set around an operation (see engines/wait_bound.py)."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

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
