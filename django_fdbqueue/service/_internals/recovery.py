"""What high-contention pops leave behind, cleared up: abandoned requests and results, old receipts.

A popper may die at any point after registering, so requests and results carry their owner's
deadline. Fulfil rounds drop requests whose deadline passed more than :data:`GRACE_SECONDS` ago
and put the items of results unclaimed that long back at their original keys; a pop that reaches
its own deadline withdraws, taking its result if one was written. Old receipts are cleared by
epoch with a blind range clear. The protocol itself is in ``contention.py``.

Why each step keeps every item exactly once: the docs' high-contention pop page, "Dead poppers"
and "Exactly once under 1021" (docs/explanation/high-contention-pop.md).
"""

from __future__ import annotations

from typing import Any

from . import dedup, keys, visibility
from .catalog import counter_bytes
from ..records import Item

#: Expired results one round puts back at most (the rest wait for the next round).
RECOVER_BATCH = 16
#: How long after a deadline others drop its request or put its result back: the allowed clock skew.
GRACE_SECONDS = 5.0
#: Receipts are grouped by the hour ("epoch") of their pop's deadline; epochs older than the
#: previous one are cleared, so a receipt lives one to two hours after its pop's deadline.
RECEIPT_EPOCH_SECONDS = 3600
#: One fast-path pop in this many also clears old receipt epochs (rounds always do).
EXPIRE_RECEIPTS_EVERY = 64
#: The marker after a result's owner and token: an item follows, or the queue was empty.
RESULT_ITEM = 1
RESULT_EMPTY = 0
#: The last element of a request's two bells: a round rings the first when it answers the
#: request, the second when it hands the request's owner the next round.
RESULT_BELL = 2
RESULT_LEAD_BELL = 3


def micros(seconds: float) -> int:
    return int(seconds * 1_000_000)


def epoch(at_us: int) -> int:
    """The receipt epoch (hour) of a time in microseconds."""
    return at_us // micros(RECEIPT_EPOCH_SECONDS)


def expire_receipts(tr: Any, qk: keys.QueueKeys, now_us: int) -> None:
    """Blind clear of the receipts of epochs before the previous one: no read, so no conflict."""
    tr.clear_range(qk.receipts.range().start, qk.receipts.pack((epoch(now_us) - 1,)))


def item_from(elements: tuple[Any, ...], payload: Any) -> Item:
    """The item a result holds, from the item key elements it carries."""
    priority, stamp, *rest = elements
    return visibility.item_from(priority, stamp, keys.ItemMeta.from_elements(rest), payload)


def put_back(tr: Any, qk: keys.QueueKeys, elements: tuple[Any, ...], payload: Any) -> None:
    """An item returns to its own key (and order index entry), so to its old place in the queue.

    Its dedup key names it again: a push of that key must not store a second copy.
    """
    priority, stamp, *rest = elements
    meta = keys.ItemMeta.from_elements(rest)
    visibility.put_ready(tr, qk, priority, stamp, meta, bytes(payload))
    dedup.restored(tr, qk, priority, stamp, meta)


def returned(tr: Any, qk: keys.QueueKeys, count: int) -> None:
    """Count `count` put-back items as queued again, and wake blocking pops: items are ready."""
    if count:
        tr.add(qk.counter(keys.SIZE), counter_bytes(count))
        tr.add(qk.counter(keys.POPPED), counter_bytes(-count))
        visibility.wake(tr, qk)


def consumed(tr: Any, qk: keys.QueueKeys, elements: tuple[Any, ...]) -> None:
    """A result's item reached its owner: only now is it consumed for its dedup key."""
    priority, stamp, *rest = elements
    dedup.consumed(tr, qk, priority, stamp, keys.ItemMeta.from_elements(rest))


def recover(tr: Any, qk: keys.QueueKeys, cutoff_us: int) -> tuple[int, bool]:
    """Put back the items of results whose owner's deadline passed before `cutoff_us`.

    Snapshot-reads the oldest expired results (they sort by deadline) and adds a read conflict
    on each one it clears, so its owner collecting it at the same moment and this recovery
    cannot both succeed. Returns how many items went back, and whether the batch was full (more
    may have expired: "empty" answers and bells count towards the batch, not towards the items).
    """
    results = qk.results
    restored = 0
    rows = list(tr.snapshot.get_range(results.range().start, results.pack((cutoff_us,)), limit=RECOVER_BATCH))
    for kv in rows:
        key = bytes(kv.key)
        tr.add_read_conflict_key(key)
        del tr[key]
        parts = results.unpack(key)
        if parts[2] == RESULT_ITEM:
            put_back(tr, qk, parts[3:], kv.value)
            restored += 1
    returned(tr, qk, restored)
    return restored, len(rows) == RECOVER_BATCH
