"""State the service keeps beside one transaction *attempt*, and how it knows a new one began.

Several service calls may share a caller's transaction, and some of them need to agree on
something for the attempt in progress: the user versions already handed to pushes, the dedup
keys pushed, and whether the attempt changed the catalog (after which the metadata version cannot be read, see
``catalog``). A transaction is retried in place (``on_error``/``reset``), so the state must
start afresh with every attempt, and it must be told apart without a read.

The versionstamp future does that on both engines: it is pending while an attempt is open, and
commit, ``reset`` and ``on_error`` all settle it (with the stamp or with an error; FoundationDB's
client replaces the promise on reset). So an attempt whose future is ready is over.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

lock = threading.Lock()
_attempts: "weakref.WeakKeyDictionary[Any, Attempt]" = weakref.WeakKeyDictionary()


class Attempt:
    """What the service knows about one attempt of one transaction."""

    __slots__ = ("stamp", "next_user_version", "catalog_changed", "dedup_pending")

    def __init__(self, stamp: Any) -> None:
        self.stamp = stamp  # the attempt's versionstamp future
        self.next_user_version = 0
        self.catalog_changed = False
        # (queue id, dedup key) -> the item this attempt pushed under it: its record cannot be
        # read back in this attempt (a versionstamped value), so a second push of the key asks here.
        self.dedup_pending: dict[tuple[bytes, str], Any] = {}


def current(tr: Any) -> Attempt:
    """The state of `tr`'s attempt in progress, kept weakly beside the transaction."""
    with lock:
        attempt = _attempts.get(tr)
        if attempt is None or attempt.stamp.is_ready():
            attempt = Attempt(tr.get_versionstamp())
            _attempts[tr] = attempt
        return attempt


def changed_catalog(tr: Any) -> bool:
    """Whether `tr`'s attempt in progress changed the catalog (no state is made to answer)."""
    attempt = _attempts.get(tr)
    return attempt is not None and attempt.catalog_changed and not attempt.stamp.is_ready()
