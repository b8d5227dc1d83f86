"""The small immutable objects the service hands back: items, queue descriptions, pages."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from django_fdbqueue.exceptions import ItemNotCommitted

from . import keys

T = TypeVar("T")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def to_datetime(micros: int) -> dt.datetime:
    """Stored timestamps are integer microseconds since the Unix epoch (UTC): exact and compact."""
    return _EPOCH + dt.timedelta(microseconds=micros)


def now_micros() -> int:
    delta = dt.datetime.now(dt.timezone.utc) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(frozen=True)
class Item:
    """One queued value. ``id`` is opaque, URL-safe and stable for the item's whole life."""

    id: str
    priority: int
    value: Any
    enqueued_at: dt.datetime


class PendingItem:
    """An item pushed inside a caller's transaction: its id exists only once that transaction commits.

    FoundationDB assigns the versionstamp (which the id is made of) at commit, so inside an open
    transaction no one can know it. Everything else is known at once. After the caller commits,
    ``id`` and ``result()`` resolve; before, they raise :class:`ItemNotCommitted` rather than
    block (waiting for a commit that this same thread has yet to make would hang forever).
    """

    __slots__ = ("priority", "value", "enqueued_at", "_user_version", "_stamp_future", "_item")

    def __init__(
        self, priority: int, value: Any, enqueued_at: dt.datetime, user_version: int, stamp_future: Any
    ) -> None:
        self.priority = priority
        self.value = value
        self.enqueued_at = enqueued_at
        self._user_version = user_version
        self._stamp_future = stamp_future
        self._item: Item | None = None

    @property
    def committed(self) -> bool:
        """True once the transaction committed (and so the id is known)."""
        if self._item is not None:
            return True
        try:
            self.result()
        except ItemNotCommitted:
            return False
        return True

    @property
    def id(self) -> str:
        return self.result().id

    def result(self, *, wait: bool = False) -> Item:
        """The committed :class:`Item`; raises :class:`ItemNotCommitted` before the commit.

        ``wait=True`` is for callers that know the commit has returned: they wait for the
        versionstamp instead of assuming the client library already delivered it.
        """
        if self._item is None:
            future = self._stamp_future
            is_ready = getattr(future, "is_ready", None)
            if not wait and is_ready is not None and not is_ready():
                raise ItemNotCommitted()
            try:
                raw = bytes(future.wait())
            except Exception as exc:  # the transaction was reset, retried or abandoned
                raise ItemNotCommitted(
                    "The transaction this item was pushed in did not commit, so the item does "
                    "not exist."
                ) from exc
            stamp = keys.fdb.tuple.Versionstamp(raw, self._user_version)
            self._item = Item(keys.item_id(self.priority, stamp), self.priority, self.value, self.enqueued_at)
        return self._item

    def __repr__(self) -> str:
        state = "committed" if self._item is not None else "pending"
        return f"<PendingItem {state} priority={self.priority} enqueued_at={self.enqueued_at.isoformat()}>"


@dataclass(frozen=True)
class QueueInfo:
    """A queue's description and statistics, all read in constant time."""

    name: str
    kind: str
    size: int
    pushed: int
    popped: int
    min_priority: int | None
    max_priority: int | None
    oldest_enqueued_at: dt.datetime | None
    created_at: dt.datetime

    @property
    def oldest_age_seconds(self) -> float | None:
        """Seconds the oldest item has waited, measured now (None when the queue is empty)."""
        if self.oldest_enqueued_at is None:
            return None
        age = (dt.datetime.now(dt.timezone.utc) - self.oldest_enqueued_at).total_seconds()
        return max(age, 0.0)  # clocks of different clients may disagree a little


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; pass ``next_cursor`` back for the next page (None: no more)."""

    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None
