"""The queue service: named FIFO queues and double-ended priority queues, as a FoundationDB layer.

This is the Python API that views, commands and applications call. Every function takes a
database *or* an open transaction first, like the functions of FoundationDB's recipes: given a
database it runs in its own transaction, retried on conflicts; given a transaction it joins it
and does not commit, so a caller can push to two queues and write its own keys atomically::

    from django_fdbqueue import service
    from django_fdbqueue.connection import get_database
    from django_fdbqueue.fdbapi import transactional

    db = get_database()
    service.create_queue(db, "emails", kind="fifo")
    service.enqueue(db, "emails", {"to": "ada@example.com"})
    item = service.dequeue(db, "emails")           # Item(id=..., priority=0, value={...}, ...)

    @transactional
    def hand_over(tr, order_id):
        service.push(tr, "billing", {"order": order_id}, priority=5)
        service.push(tr, "shipping", {"order": order_id})
        tr[b"my-app/" + order_id.encode()] = b"queued"   # all three, or none

Data model
==========

All keys live under the app's root subspace (``FDBQUEUE["ROOT"]``, default ``("fdbqueue",)``);
``keys.py`` has the exact layout. There are two parts.

**The catalog**, ``root/"c"/name -> (kind, created_at, queue_id)``, ordered by name, so listing
is one range read of a page's worth of keys however many queues exist. ``queue_id`` is 16
random bytes chosen at creation, and all of a queue's data lives under ``root/"q"/queue_id``,
not under its name: deleting a queue clears its catalog entry and its whole subspace in one
transaction, and a queue later created with the same name gets a fresh id, so its items can
never mix with leftovers of the old one. Every operation reads the catalog entry with an
ordinary read, so an operation racing a delete or re-create of its queue conflicts and retries
(and then sees the truth) instead of writing into a dead queue.

**Items**, ``items/priority/versionstamp/enqueued_at/codec -> payload``. The recipe keys items
by ``(priority, count, random)``: ``count`` (read with a snapshot read from the highest key of
that priority, plus one) gives push order, and ``random`` keeps concurrent pushes that read the
same count apart (they then tie-break randomly). We replace ``(count, random)`` with a single
versionstamp, which FoundationDB fills in at commit time with the commit version, the position
of the transaction in its commit batch, and our 2-byte per-transaction counter:

* it is unique without randomness, and it increases in *commit* order, so items of one priority
  come out exactly in the order their pushes committed (the recipe only approximates this:
  concurrent pushes with the same count come out in random order);
* a push reads nothing from the items at all (not even a snapshot read), so pushes never
  conflict with each other or with pops; the only read is the catalog entry, which only
  create/delete write.

Several pushes in one transaction take user versions 0, 1, 2, ... (at most 65,536 per
transaction), so they too keep their order.

Because the key, not the value, carries the metadata (priority, push order, enqueue time and the
name of the codec that encoded the value), the stored value is the encoded payload byte for
byte, and the size limit is exactly FoundationDB's: 100,000 bytes encoded. Larger values are
rejected with ``ValueTooLarge`` before anything is written (no chunking).

**Order index**, ``order/versionstamp -> (priority, enqueued_at)``: the same items in push order
across priorities, so the oldest item (and its age) is the first key, in constant time. Each
pop clears both keys.

**Counters**, ``counters/"size" | "pushed" | "popped"``: 8-byte little-endian integers changed
only with the atomic ``add``, which adds no read conflict: pushes and pops of different items
stay conflict-free, and statistics are three point reads plus three ``limit=1`` range reads
(lowest and highest priority present, oldest item). ``clear`` removes the items and sets size to
0 with blind writes; it does not count as popping.

Pops
====

``pop_min`` is the recipe's: the first key (forward, ``limit=1``) of the items range, cleared.
Its read conflict range reaches only up to that key, so pushes after it do not conflict; two
pops that take the same item do, and one retries.

``pop_max`` differs from the recipe on purpose. The recipe's reverse scan returns the *last* key,
i.e. the newest item of the highest priority. Here both ends are first-in-first-out within a
priority: ``pop_max`` returns the *earliest* item of the highest priority. It finds that
priority with a snapshot reverse read (``limit=1``), adds a read conflict range covering
everything above that priority ("nothing higher appeared"), then reads that priority's first
item with an ordinary forward read. A concurrent push at the same priority lands after the item
taken and does not conflict; a push at a higher priority does, and the pop retries and takes it.

One conservative exception comes from FoundationDB itself: since a versionstamped key is unknown
until commit, the client reserves for it every key from (its read version, 0) upwards. A push
whose read version *equals* the commit version of the item being popped (nothing else committed
in between, typical of an idle database) can therefore conflict with that pop at the same
priority; the pop retries. Both engines behave alike here.

FIFO queues are priority queues whose items all have priority 0 and that are used from the
``min`` end only; other priorities or the ``max`` end raise ``WrongQueueKind``.

**Many poppers on one queue.** Every plain pop reads the first item, so pops of one queue that
overlap in time conflict and retry; the more clients, and the slower each round trip, the more
work is lost. ``pop(db, name, end, mode="high-contention")`` implements the recipe's
high-contention pop, made safe against dead poppers and ``commit_unknown_result``: a pop that
finds nobody waiting is one plain pop; one that finds pops waiting serves them and itself in one
transaction; one that keeps losing races stages a versionstamped request under the queue's
``"r"`` subspace, which any popper then serves in a batched "fulfil" transaction. Items still
leave exactly once and in queue order (a round works from its snapshot, so a more urgent item
pushed meanwhile waits for the next round). It needs a database, not a transaction (it runs
several), and raises ``InvalidArgument`` if given one. ``service/contention.py`` documents the
protocol, its order and its failure handling; the default stays ``mode="plain"``.

Reliable consumption
====================

``claim`` is the at-least-once counterpart of ``pop``: the item is hidden under a lease and
comes back, at its place in queue order, unless the holder acks it before the lease ends
(``leases.py``). ``release`` gives it back at once or after a delay; ``extend`` moves the
lease's end. An item claimed ``max_attempts`` times (a per-queue setting) without an ack moves
to the queue's dead letters (``deadletters.py``). ``push(..., delay=)`` hides an item until a
time (``visibility.py``: leased and delayed items are one index, ordered by when they show).
``dedup_key`` makes a push idempotent (``dedup.py``). ``wait=`` makes pops and claims block
on a watch until an item is visible (``waiting.py``).

Ids, cursors and pending items
==============================

An item's ``id`` is the base64url (unpadded) of the tuple ``(priority, versionstamp)`` from its
key: opaque, URL-safe, and stable for the item's life. Cursors are the same kind of token holding
where a page ended (browse: end, priority, versionstamp; list: last name). They are positions,
so they stay valid when the item they name is popped, and tokens that are not canonical ones
this service produced raise ``InvalidCursor``.

The versionstamp exists only after commit. So ``push`` given a *database* returns an ``Item``
(it asks for ``tr.get_versionstamp()`` before committing and reads it after), while ``push``
given an open *transaction* returns a :class:`PendingItem`: priority, value and enqueued_at at
once, and ``id`` / ``result()`` once the caller has committed (before, they raise
``ItemNotCommitted`` instead of blocking).

Batches and limits
==================

``push_many`` validates and encodes every value first (one bad value: nothing written), then
writes them in transactions of about 1 MB or 5,000 items (FoundationDB allows 10 MB and 65,536
user versions per transaction, and advises staying near 1 MB). ``pop_many`` pops up to 1,000
items or about 1 MB of values per transaction. Each transaction is atomic; a batch spanning
several is not as a whole. Given an open transaction, both put everything in that transaction.

Semantics worth knowing: a pop is at-most-once delivery (the item is gone when the pop
commits); a push retried after ``commit_unknown_result`` may be stored twice unless it carries a
``dedup_key``. Pushes made in a transaction cannot be read in that same
transaction: their versionstamped keys are unknown until the commit, so FoundationDB fails a
read that reaches where they will land with ``FDBError`` 1036 (accessed_unreadable). In one
transaction, pop or read a queue *before* pushing to it. Statistics reads are ordinary reads:
inside your own read-write transaction they conflict with concurrent pushes and pops of that
queue, which is what serializability asks for.

Observing
=========

The public operations are decorated with ``observe.observed``, which reports each call's
operation, outcome and duration to registered listeners (``django_fdbqueue.metrics`` registers
one) and costs next to nothing when none is registered. See ``service/observe.py``.
"""

from __future__ import annotations

import datetime as dt
import time
import warnings
from typing import Any, Callable, Iterable, Literal

from django_fdbqueue import codecs
from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import is_transaction, transactional

from . import catalog as _catalog
from . import contention as _contention
from . import deadletters as _deadletters
from . import items as _items
from . import keys as _keys
from . import leases as _leases
from . import visibility as _visibility
from . import waiting as _waiting
from .dedup import DEDUP_WINDOW_SECONDS
from .items import MAX_PUSHES_PER_TRANSACTION, MAX_VALUE_BYTES
from .leases import DEFAULT_LEASE_SECONDS, MAX_LEASE_SECONDS
from .observe import observed
from .records import DeadLetter, Item, Lease, Page, PendingItem, QueueInfo, ScheduledItem, now_micros

LIMIT_MAX = 1000
#: Pop modes: one transaction (joins the caller's), or staged requests for contended queues.
PLAIN = "plain"
HIGH_CONTENTION = "high-contention"
POP_MODES = (PLAIN, HIGH_CONTENTION)
PopMode = Literal["plain", "high-contention"]
# A range read's limit is a C int in FoundationDB's client.
MAX_POP_MANY = 2**31 - 1
#: Longest a pop or claim may block with ``wait=``, in every face (Python, REST, CLI, worker).
#: A wait holds what it runs in for its whole length: over HTTP a server worker, and the read
#: timeout of every proxy on the way (often 30 or 60 s), so 20 s stays under them. A longer
#: wait is a loop of these, which costs one read and one watch per 20 s. Longer is refused,
#: never silently cut.
MAX_WAIT_SECONDS = 20.0
#: Furthest into the future an item may be delayed.
MAX_DELAY_SECONDS = 366 * 86_400.0
MAX_ATTEMPTS_LIMIT = 1000

__all__ = [
    "Item",
    "PendingItem",
    "QueueInfo",
    "Page",
    "Lease",
    "ScheduledItem",
    "DeadLetter",
    "MAX_VALUE_BYTES",
    "MAX_WAIT_SECONDS",
    "MAX_DELAY_SECONDS",
    "MAX_LEASE_SECONDS",
    "DEFAULT_LEASE_SECONDS",
    "DEDUP_WINDOW_SECONDS",
    "POP_MODES",
    "create_queue",
    "set_max_attempts",
    "get_queue",
    "queue_exists",
    "delete_queue",
    "list_queues",
    "enqueue",
    "dequeue",
    "push",
    "pop",
    "pop_min",
    "pop_max",
    "peek",
    "peek_min",
    "peek_max",
    "size",
    "empty",
    "clear",
    "push_many",
    "pop_many",
    "browse",
    "get_item",
    "claim",
    "ack",
    "release",
    "extend",
    "receipt_queue",
    "scheduled",
    "dead_letters",
    "get_dead_letter",
    "requeue_dead_letter",
    "delete_dead_letter",
]

Codec = codecs.Codec | str | None


# --- catalog ---------------------------------------------------------------------------------


def _check_max_attempts(max_attempts: object) -> int | None:
    if max_attempts is None:
        return None
    return _keys.check_count(max_attempts, "max_attempts", minimum=1, maximum=MAX_ATTEMPTS_LIMIT)


@observed
def create_queue(db_or_tr: Any, name: str, kind: str = "fifo", *, max_attempts: int | None = None) -> QueueInfo:
    """Create an empty queue; an existing name raises QueueAlreadyExists (never an overwrite).

    ``max_attempts`` (1 to 1000, or None for no limit): claims an item may have without an
    ack before it moves to the dead letters.
    """
    _keys.check_name(name)
    _keys.check_kind(kind)
    return _catalog.create_queue(db_or_tr, name, kind, _check_max_attempts(max_attempts))


@observed
def set_max_attempts(db_or_tr: Any, name: str, max_attempts: int | None) -> QueueInfo:
    """Change the queue's ``max_attempts`` (None: no limit); applies to leases ending from now on."""
    _keys.check_name(name)
    return _catalog.set_max_attempts(db_or_tr, name, _check_max_attempts(max_attempts))


@observed
def get_queue(db_or_tr: Any, name: str) -> QueueInfo:
    """The queue's kind and statistics (constant time); QueueNotFound if there is none."""
    _keys.check_name(name)
    return _catalog.get_queue(db_or_tr, name)


@observed
def queue_exists(db_or_tr: Any, name: str) -> bool:
    _keys.check_name(name)
    return _catalog.queue_exists(db_or_tr, name)


@observed
def delete_queue(db_or_tr: Any, name: str) -> None:
    """Delete the queue and all its items in one transaction."""
    _keys.check_name(name)
    _catalog.delete_queue(db_or_tr, name)


@observed
def list_queues(
    db_or_tr: Any, *, prefix: str = "", cursor: str | None = None, limit: int = 50
) -> Page[QueueInfo]:
    """Queues ordered by name (byte order), ``limit`` per page, optionally those starting with ``prefix``."""
    _keys.check_prefix(prefix)
    limit = _keys.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = _keys.parse_list_cursor(cursor) if cursor is not None else None
    return _catalog.list_queues(db_or_tr, prefix, after, limit)


# --- pushing ---------------------------------------------------------------------------------


def _visible_at(delay: object, not_before: object) -> int | None:
    """When a pushed item becomes visible (microseconds), or None for at once."""
    if delay is not None and not_before is not None:
        raise InvalidArgument("Pass delay or not_before, not both.")
    if delay is not None:
        seconds = _keys.check_seconds(delay, "delay", minimum=0, maximum=MAX_DELAY_SECONDS)
        return now_micros() + int(round(seconds * 1_000_000)) if seconds > 0 else None
    if not_before is not None:
        if not isinstance(not_before, dt.datetime) or not_before.utcoffset() is None:
            raise InvalidArgument("not_before must be a timezone-aware datetime.", field="not_before")
        micros = int((not_before - _EPOCH).total_seconds() * 1_000_000)
        if micros - now_micros() > MAX_DELAY_SECONDS * 1_000_000:
            raise InvalidArgument("not_before may be at most 366 days ahead.", field="not_before")
        return micros
    return None


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@observed
def push(
    db_or_tr: Any,
    name: str,
    value: Any,
    priority: int = 0,
    *,
    codec: Codec = None,
    delay: float | None = None,
    not_before: dt.datetime | None = None,
    dedup_key: str | None = None,
) -> Item | PendingItem:
    """Add ``value`` with ``priority``. Never conflicts with other pushes.

    Given a database: the committed Item. Given an open transaction: a PendingItem whose id
    resolves after the caller commits. ``delay`` (seconds) or ``not_before`` (an aware
    datetime) hides the item until then. With ``dedup_key``, a push of a key whose item still
    exists (queued, delayed, leased or dead) or was consumed less than DEDUP_WINDOW_SECONDS ago
    adds nothing and returns that item with ``duplicate=True``, also when retried after
    ``commit_unknown_result``.
    """
    _keys.check_name(name)
    dedup_key = None if dedup_key is None else _keys.check_dedup_key(dedup_key)
    prepared = _items.prepare(value, priority, codec, visible_us=_visible_at(delay, not_before), dedup_key=dedup_key)
    (pending,) = _items.push_prepared(db_or_tr, name, [prepared])
    return pending if is_transaction(db_or_tr) else pending.result(wait=True)


def enqueue(db_or_tr: Any, name: str, value: Any, *, codec: Codec = None, **options: Any) -> Item | PendingItem:
    """FIFO spelling of ``push(..., priority=0)`` (same ``delay``, ``not_before``, ``dedup_key``)."""
    return push(db_or_tr, name, value, 0, codec=codec, **options)


def _split_pair(entry: Any) -> tuple[Any, Any]:
    # Every 2-tuple is (value, priority), so a mistyped priority is an error rather than
    # silently becoming part of the value; anything else is a value with priority 0.
    # To push a pair itself as a value, use a list or wrap it: ((1, 2), 0).
    if isinstance(entry, tuple) and len(entry) == 2:
        return entry
    return entry, 0


@observed
def push_many(
    db_or_tr: Any,
    name: str,
    items: Iterable[Any],
    *,
    codec: Codec = None,
    delay: float | None = None,
    not_before: dt.datetime | None = None,
) -> list[Item | PendingItem]:
    """Push many values, in order, in as few transactions as the limits allow.

    ``items`` yields ``(value, priority)`` tuples or bare values (priority 0; a list is a value,
    a 2-tuple is always a pair). Everything is
    validated before the first write, so one bad value means nothing is written. ``delay`` or
    ``not_before`` applies to every item.
    """
    _keys.check_name(name)
    if isinstance(items, (str, bytes, dict)):
        raise InvalidArgument("items must be an iterable of values or (value, priority) pairs.")
    visible_us = _visible_at(delay, not_before)
    prepared = [_items.prepare(*_split_pair(entry), codec, visible_us=visible_us) for entry in items]
    if is_transaction(db_or_tr):
        if len(prepared) > MAX_PUSHES_PER_TRANSACTION:
            raise InvalidArgument(
                f"At most {MAX_PUSHES_PER_TRANSACTION} items can be pushed in one transaction; "
                "pass the database to let push_many split them."
            )
        return list(_items.push_prepared(db_or_tr, name, prepared))
    results: list[Item | PendingItem] = []
    for batch in _items.push_batches(prepared):
        results.extend(p.result(wait=True) for p in _items.push_prepared(db_or_tr, name, batch))
    return results


# --- popping and peeking -----------------------------------------------------------------------


def _blocking(db_or_tr: Any, name: str, end: str, wait: object, attempt: Callable[[], Any]) -> Any:
    """Run ``attempt`` until it returns something or ``wait`` seconds pass (see ``waiting.py``)."""
    if wait is None:
        return attempt()
    seconds = _keys.check_seconds(wait, "wait", minimum=0, maximum=MAX_WAIT_SECONDS)
    if is_transaction(db_or_tr):
        raise InvalidArgument(
            "wait= blocks across several transactions, so it needs the database, not an open transaction."
        )
    deadline = time.monotonic() + seconds
    while True:
        got = attempt()
        if got is not None or not _waiting.until_visible(db_or_tr, name, end, deadline):
            return got


@observed(none_is_empty=True)
def pop(
    db_or_tr: Any,
    name: str,
    end: str = "min",
    *,
    mode: PopMode = "plain",
    timeout: float | None = None,
    wait: float | None = None,
) -> Item | None:
    """Remove and return the next item from ``end`` ("min" or "max"); None when empty.

    ``mode="plain"`` (the default) is one transaction, and joins the caller's when given one.
    ``mode="high-contention"`` is for many clients popping one queue at once: pops that meet
    contention stage a request and are served in batches (see ``service/contention.py``). It
    needs the database, not a transaction, and gives up after ``timeout`` seconds (default 5)
    with ``FDBError`` 1031. ``wait`` (seconds) blocks until an item is visible or the time is
    up (then None), woken by a watch.
    """
    _keys.check_name(name)
    _keys.check_end(end)
    if mode == HIGH_CONTENTION:
        return _blocking(db_or_tr, name, end, wait, lambda: _contention.pop(db_or_tr, name, end, timeout=timeout))
    if mode != PLAIN:
        raise InvalidArgument(
            f"mode must be {PLAIN!r} or {HIGH_CONTENTION!r}, not {mode!r}.", mode=str(mode)
        )
    if timeout is not None:
        raise InvalidArgument(
            "timeout applies to mode='high-contention'; a plain pop is bounded by FDBQUEUE['TIMEOUT']."
        )

    def once() -> Item | None:
        popped, _cut = _items.pop_n(db_or_tr, name, end, 1, None)
        return popped[0] if popped else None

    return _blocking(db_or_tr, name, end, wait, once)


def pop_min(db_or_tr: Any, name: str, *, mode: PopMode = "plain", timeout: float | None = None,
            wait: float | None = None) -> Item | None:
    """The earliest-pushed item of the lowest priority."""
    return pop(db_or_tr, name, "min", mode=mode, timeout=timeout, wait=wait)


def pop_max(db_or_tr: Any, name: str, *, mode: PopMode = "plain", timeout: float | None = None,
            wait: float | None = None) -> Item | None:
    """The earliest-pushed item of the highest priority (the recipe would give the latest)."""
    return pop(db_or_tr, name, "max", mode=mode, timeout=timeout, wait=wait)


def dequeue(db_or_tr: Any, name: str, *, mode: PopMode = "plain", timeout: float | None = None,
            wait: float | None = None) -> Item | None:
    """FIFO spelling of ``pop_min``."""
    return pop(db_or_tr, name, "min", mode=mode, timeout=timeout, wait=wait)


@observed(none_is_empty=True)
def peek(db_or_tr: Any, name: str, end: str = "min") -> Item | None:
    """The item ``pop`` would return, without removing it."""
    _keys.check_name(name)
    _keys.check_end(end)
    return _items.peek_one(db_or_tr, name, end)


def peek_min(db_or_tr: Any, name: str) -> Item | None:
    return peek(db_or_tr, name, "min")


def peek_max(db_or_tr: Any, name: str) -> Item | None:
    return peek(db_or_tr, name, "max")


@observed
def pop_many(db_or_tr: Any, name: str, n: int, end: str = "min") -> list[Item]:
    """Pop up to ``n`` items from ``end`` in pop order, in as few transactions as the limits allow."""
    _keys.check_name(name)
    _keys.check_end(end)
    n = _keys.check_count(n, "n", minimum=1, maximum=MAX_POP_MANY)
    if is_transaction(db_or_tr):
        return _items.pop_n(db_or_tr, name, end, n, None)[0]
    popped: list[Item] = []
    while len(popped) < n:
        want = min(n - len(popped), _items.POP_BATCH_ITEMS)
        batch, cut = _items.pop_n(db_or_tr, name, end, want, _items.BATCH_BYTES)
        popped.extend(batch)
        if len(batch) < want and not cut:
            break  # the queue ran dry
    return popped


@observed
def browse(
    db_or_tr: Any, name: str, *, end: str = "min", cursor: str | None = None, limit: int = 50
) -> Page[Item]:
    """A page of items in the order they would be popped from ``end``; nothing is removed."""
    _keys.check_name(name)
    _keys.check_end(end)
    limit = _keys.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = _keys.parse_browse_cursor(cursor, end) if cursor is not None else None
    return _items.browse_page(db_or_tr, name, end, after, limit)


@observed(none_is_empty=True)
def get_item(db_or_tr: Any, name: str, item_id: str) -> Item | None:
    """The item with this id if it is still queued (None once popped or cleared)."""
    _keys.check_name(name)
    priority, stamp = _keys.parse_item_id(item_id)
    return _items.get_item(db_or_tr, name, priority, stamp)


# --- size and clearing ---------------------------------------------------------------------------


@observed
def size(db_or_tr: Any, name: str) -> int:
    """Number of items (an atomic counter: one read)."""
    _keys.check_name(name)
    return _items.size(db_or_tr, name)


@observed
def empty(db_or_tr: Any, name: str) -> bool:
    _keys.check_name(name)
    return _items.empty(db_or_tr, name)


@observed
def clear(db_or_tr: Any, name: str) -> None:
    """Remove every item (the queue itself stays)."""
    _keys.check_name(name)
    _items.clear(db_or_tr, name)


# --- leases: claim, then ack, release or extend ---------------------------------------------------


def _check_lease(seconds: object, what: str = "lease") -> float:
    return _keys.check_seconds(seconds, what, minimum=0, maximum=MAX_LEASE_SECONDS, inclusive_minimum=False)


@observed(none_is_empty=True)
def claim(
    db_or_tr: Any,
    name: str,
    *,
    lease: float = DEFAULT_LEASE_SECONDS,
    end: str = "min",
    wait: float | None = None,
) -> Lease | None:
    """Take the next visible item for ``lease`` seconds (at-least-once delivery); None if none.

    The item stays stored but hidden; ack it with the Lease's receipt when done, or it comes
    back at its place in queue order when the lease ends. ``item.attempts`` counts this claim.
    ``wait`` blocks as for ``pop`` (and then needs the database).
    """
    _keys.check_name(name)
    _keys.check_end(end)
    seconds = _check_lease(lease)
    return _blocking(db_or_tr, name, end, wait, lambda: _leases.claim_once(db_or_tr, name, seconds, end))


@observed
def ack(db_or_tr: Any, receipt: str, *, name: str | None = None) -> None:
    """The claimed item is done: remove it for good.

    Raises LeaseExpired once the lease's time is up, LeaseNotFound when the lease is over
    (acked, released, or expired and moved on), InvalidReceipt for anything not a receipt (or,
    with ``name``, a receipt of another queue). A retry after ``commit_unknown_result`` that
    finds its own earlier ack reports success.
    """
    _leases.ack(db_or_tr, receipt, name)


@observed
def release(db_or_tr: Any, receipt: str, *, delay: float = 0, name: str | None = None) -> str:
    """Give the item back: visible again at once, or after ``delay`` seconds.

    Returns "ready", "delayed", or "dead" when the item had its queue's ``max_attempts`` claims
    and moved to the dead letters. Errors as for ``ack``.
    """
    seconds = _keys.check_seconds(delay, "delay", minimum=0, maximum=MAX_DELAY_SECONDS)
    return _leases.release(db_or_tr, receipt, seconds, name)


@observed
def extend(
    db_or_tr: Any, receipt: str, lease: float | None = None, *, name: str | None = None, seconds: float | None = None
) -> Lease:
    """Make the lease end ``lease`` seconds from now (the receipt stays the same).

    ``lease`` means what it means for ``claim``: seconds from now until the lease ends, with
    the same bounds. ``seconds=`` is its deprecated spelling, still accepted. Errors as for
    ``ack``.
    """
    return _leases.extend(db_or_tr, receipt, _check_lease(_renamed(lease, seconds)), name)


def _renamed(lease: object, seconds: object) -> object:
    """extend's ``lease``, given under its old name ``seconds`` or its own (not both)."""
    if seconds is None:
        if lease is None:
            raise InvalidArgument("extend needs lease: the seconds from now until the lease ends.", field="lease")
        return lease
    if lease is not None:
        raise InvalidArgument("Pass lease (or its old name seconds), not both.", field="lease")
    warnings.warn("extend(seconds=...) is deprecated: pass lease=... instead.", DeprecationWarning, stacklevel=4)
    return seconds


def receipt_queue(receipt: str) -> str:
    """The name of the queue a receipt belongs to (InvalidReceipt if it is not a receipt)."""
    return _keys.parse_receipt(receipt).name


# --- hidden items and dead letters ----------------------------------------------------------------


@transactional
def _scheduled(tr: Any, name: str, after: tuple | None, limit: int) -> Page[ScheduledItem]:
    _entry, qk = _catalog.require(tr, name)
    rows, last = _visibility.scheduled_page(tr, qk, after, limit)
    cursor = None if last is None else _keys.position_cursor(_keys.SCHEDULE_CURSOR, *last)
    return Page(rows, cursor)


@observed
def scheduled(db_or_tr: Any, name: str, *, cursor: str | None = None, limit: int = 50) -> Page[ScheduledItem]:
    """Leased and delayed items, in the order they become visible."""
    _keys.check_name(name)
    limit = _keys.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = None if cursor is None else _keys.parse_position_cursor(cursor, _keys.SCHEDULE_CURSOR, 4)
    return _scheduled(db_or_tr, name, after, limit)


@observed
def dead_letters(db_or_tr: Any, name: str, *, cursor: str | None = None, limit: int = 50) -> Page[DeadLetter]:
    """The queue's dead letters, in queue order."""
    _keys.check_name(name)
    limit = _keys.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = None if cursor is None else _keys.parse_position_cursor(cursor, _keys.DEAD_CURSOR, 2)
    return _deadletters.page(db_or_tr, name, after, limit)


@observed(none_is_empty=True)
def get_dead_letter(db_or_tr: Any, name: str, item_id: str) -> DeadLetter | None:
    """The dead letter with this id, or None if the queue has none such."""
    _keys.check_name(name)
    return _deadletters.get(db_or_tr, name, *_keys.parse_item_id(item_id))


@observed
def requeue_dead_letter(db_or_tr: Any, name: str, item_id: str) -> Item:
    """Put a dead letter back among the ready items, at its old place, attempts reset to 0."""
    _keys.check_name(name)
    return _deadletters.requeue(db_or_tr, name, *_keys.parse_item_id(item_id))


@observed
def delete_dead_letter(db_or_tr: Any, name: str, item_id: str) -> None:
    _keys.check_name(name)
    _deadletters.delete(db_or_tr, name, *_keys.parse_item_id(item_id))
