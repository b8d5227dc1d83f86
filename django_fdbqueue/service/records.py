"""The small immutable objects the service hands back: items, queue descriptions, pages."""

from __future__ import annotations

import datetime as dt
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from django_fdbqueue.exceptions import ItemNotCommitted
from django_fdbqueue.fdbapi import fdb


T = TypeVar("T")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def to_datetime(micros: int) -> dt.datetime:
    """Stored timestamps are integer microseconds since the Unix epoch (UTC): exact and compact."""
    return _EPOCH + dt.timedelta(microseconds=micros)


def now_micros() -> int:
    """The wall clock in integer microseconds since the epoch (read on every operation: cheap)."""
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Item:
    """One queued value. ``id`` is opaque, URL-safe and stable for the item's whole life.

    ``attempts`` counts the claims the item has had. ``duplicate`` is True only on what a push
    with a ``dedup_key`` returns when that key was already taken: nothing was added, and the
    item is the one stored under the key, as it is now (its id, priority, enqueue time, attempts
    and value, never the value this push passed). Once that item has been consumed (or while a
    high-contention pop is handing it over) its value is not where a push looks, and ``value``
    is None.
    """

    id: str
    priority: int
    value: Any
    enqueued_at: dt.datetime
    attempts: int = 0
    duplicate: bool = False


@dataclass(frozen=True)
class Lease:
    """A claimed item, hidden from other consumers until ``lease_expires_at`` unless acked first.

    ``receipt`` is what ack, release and extend take; it names the queue and carries a random
    token that only this claim knows, so no other holder of the item can use it.
    ``lease_expires_at`` has that name in every face (REST and the CLI's JSON too).
    """

    item: Item
    receipt: str
    lease_expires_at: dt.datetime

    @property
    def expires_at(self) -> dt.datetime:
        """Deprecated spelling of ``lease_expires_at``, still readable (see docs/reference/names.md)."""
        warnings.warn("Lease.expires_at is deprecated: read Lease.lease_expires_at.", DeprecationWarning, stacklevel=2)
        return self.lease_expires_at


@dataclass(frozen=True)
class SteppedLease(Lease):
    """The Lease of a ``claim(..., step=...)``: also what the step returned in the claim's
    transaction. A class of its own, so a plain claim's Lease keeps exactly its three fields."""

    step_result: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ScheduledItem:
    """An item that is not visible yet: leased until ``visible_at``, or delayed until then."""

    item: Item
    state: str  # "leased" or "delayed"
    visible_at: dt.datetime


@dataclass(frozen=True)
class DeadLetter:
    """An item set aside after ``max_attempts`` claims without an ack."""

    item: Item
    died_at: dt.datetime


class PendingItem:
    """An item pushed inside a caller's transaction: its id exists only once that transaction commits.

    FoundationDB assigns the versionstamp (which the id is made of) at commit, so inside an open
    transaction no one can know it. Everything else is known at once. After the caller commits,
    ``id`` and ``result()`` resolve; before, they raise :class:`ItemNotCommitted` rather than
    block (waiting for a commit that this same thread has yet to make would hang forever).
    """

    __slots__ = ("priority", "value", "enqueued_at", "_user_version", "_stamp_future", "_item", "_item_id")

    def __init__(
        self,
        priority: int,
        value: Any,
        enqueued_at: dt.datetime,
        user_version: int,
        stamp_future: Any,
        item_id: Callable[[int, Any], str],
    ) -> None:
        self.priority = priority
        self.value = value
        self.enqueued_at = enqueued_at
        self._user_version = user_version
        self._stamp_future = stamp_future
        self._item_id = item_id  # how the service names an item: (priority, versionstamp) -> id
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
                    "The transaction this item was pushed in did not commit, so the item does not exist."
                ) from exc
            stamp = fdb.tuple.Versionstamp(raw, self._user_version)
            self._item = Item(self._item_id(self.priority, stamp), self.priority, self.value, self.enqueued_at)
        return self._item

    def __repr__(self) -> str:
        state = "committed" if self._item is not None else "pending"
        return f"<PendingItem {state} priority={self.priority} enqueued_at={self.enqueued_at.isoformat()}>"


@dataclass(frozen=True)
class QueueInfo:
    """A queue's description and statistics, all read in constant time.

    ``size`` counts the items a pop could take (ready ones); ``leased``, ``delayed`` and ``dead``
    the claimed, not-yet-visible and dead-lettered ones. An item whose lease or delay ran out is
    counted where it was until the next pop or claim of the queue moves it (a peek only looks).
    """

    name: str
    kind: str
    size: int
    pushed: int
    popped: int
    min_priority: int | None
    max_priority: int | None
    oldest_enqueued_at: dt.datetime | None
    created_at: dt.datetime
    leased: int = 0
    delayed: int = 0
    dead: int = 0
    max_attempts: int | None = None
    #: Per-key limits (see ``service._internals.keylimits``): leases at once, and claims per second, per key.
    key_concurrency: int | None = None
    key_rate: float | None = None
    #: On a queue split by tenant, how many tenants have ready items; None on other queues.
    tenants: int | None = None

    @property
    def oldest_age_seconds(self) -> float | None:
        """Seconds the oldest item has waited, measured now (None when the queue is empty)."""
        if self.oldest_enqueued_at is None:
            return None
        age = (dt.datetime.now(dt.timezone.utc) - self.oldest_enqueued_at).total_seconds()
        return max(age, 0.0)  # clocks of different clients may disagree a little


#: Most rows one page of a listing holds (queues, items, scheduled items, dead letters).
LIMIT_MAX = 1000


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing; pass ``next_cursor`` back for the next page (None: no more)."""

    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None
