"""What this package reports (refusals, audit records) to whoever listens, such as the metrics.

A hook rather than an import of ``metrics``, so access works without prometheus-client and the
metrics package decides for itself whether to count (as ``service.observe`` does for operations).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from typing import Callable, Iterator

__all__ = ["AUDITED", "REFUSED", "add_listener", "emit", "quiet", "remove_listener"]

logger = logging.getLogger("django_fdbqueue.access")

REFUSED = "refused"
AUDITED = "audited"

Listener = Callable[[str, str], None]
_listeners: list[Listener] = []
_quiet = contextvars.ContextVar("django_fdbqueue_access_quiet", default=False)


def add_listener(listener: Listener) -> None:
    """Call ``listener(event, action)`` on every refusal and audit record (idempotent)."""
    if listener not in _listeners:
        _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Emit nothing in this block (this thread or task only): for a question asked on a user's
    behalf that the user did not ask, such as whether the browsable API may draw a form."""
    token = _quiet.set(True)
    try:
        yield
    finally:
        _quiet.reset(token)


def emit(event: str, action: str) -> None:
    """Tell every listener; a failing listener is logged, never the caller's problem."""
    if _quiet.get():
        return
    for listener in list(_listeners):
        try:
            listener(event, action)
        except Exception:  # noqa: BLE001 - counting must not break a request
            logger.exception("An access listener failed on %s %s", event, action)
