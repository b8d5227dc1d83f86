"""Fulfil rounds of high-contention pops: one transaction hands items to waiting requests, in order.

A round snapshot-reads up to :data:`ROUND_REQUESTS` requests of one end and as many items from
that end in pop order, pairs them (an arriving pop, unregistered, comes last) and, for each
pair, adds a read conflict on the exact request and item keys, clears both and writes the
owner's result. So it conflicts only with transactions that took one of *its* items or touched
one of *its* requests. ``contention.py`` has the protocol; ``recovery.py`` what a round also
clears up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django_fdbqueue.fdbapi import fdb

from . import activity, dedup, keys, visibility
from .catalog import Entry, counter_bytes
from .items import BATCH_BYTES, decode_item, walk
from .popper import EMPTY, Outcome, Pop
from .records import Item
from .recovery import GRACE_SECONDS, RECOVER_BATCH, RESULT_EMPTY, RESULT_ITEM, expire_receipts, micros, recover

#: Requests one fulfil round serves at most (and so items it takes, within ROUND_BYTES).
ROUND_REQUESTS = 64
#: Payload bytes one round moves at most: FoundationDB advises transactions near 1 MB.
ROUND_BYTES = BATCH_BYTES

#: A request a round serves: its key (None for the arriving pop itself), token and deadline.
Live = tuple[bytes | None, bytes, int]


class SnapshotReads:
    """A transaction seen through snapshot reads only, for the service's walk functions.

    ``walk_min`` / ``walk_max`` read with ordinary reads and ``walk_max`` narrows its conflicts
    with ``add_read_conflict_range``. A caller that adds read conflicts on exactly the keys it
    takes (a fulfil round, or the bench's random-k pop) walks through this view instead.
    """

    def __init__(self, tr: Any) -> None:
        self.snapshot = tr.snapshot

    def get_range(self, *args: Any, **kwargs: Any) -> Any:
        return self.snapshot.get_range(*args, **kwargs)

    def add_read_conflict_range(self, begin: bytes, end: bytes) -> None:
        """Nothing: the round adds a read conflict on each key it takes."""


@dataclass
class Round:
    """What one fulfil round did; all zero when it did not commit."""

    committed: bool = False
    served: int = 0
    answered_empty: int = 0
    dropped: int = 0
    restored: int = 0
    #: It stopped at a limit: more requests or expired results may be waiting.
    more: bool = False
    #: What it gave the calling pop's own request: an Item, EMPTY, or None.
    mine: Item | Outcome | None = None


def fulfil_in(tr: Any, entry: Entry, qk: keys.QueueKeys, end: str, p: Pop | None, now_us: int, *,
              waiting: list | None = None, serve_self: bool = False) -> Round:
    """The body of a round at ``now_us`` (see the module docstring); ``committed`` is left to the caller.

    ``waiting`` is the snapshot read of the requests when the caller already made it.
    ``serve_self`` adds the calling pop, unregistered, as the last requester: it gets the item
    after everyone waiting (with a receipt), or "empty" if none is left.
    """
    done = Round()
    cutoff_us = now_us - micros(GRACE_SECONDS)
    requests = qk.requests(end)
    visibility.promote(tr, qk, entry, now_us)
    if waiting is None:
        r = requests.range()
        waiting = list(tr.snapshot.get_range(r.start, r.stop, limit=ROUND_REQUESTS))
    done.more = len(waiting) == ROUND_REQUESTS
    live = _live(tr, requests, waiting, cutoff_us, done)
    if serve_self:
        assert p is not None
        live.append((None, p.token, p.deadline_us))  # no key: this pop never registered
    kvs: list[Any] = []
    cut = False
    if live:
        kvs, cut = walk(SnapshotReads(tr), qk, end, len(live), max_bytes=ROUND_BYTES)
        done.more = done.more or cut
    _serve(tr, qk, list(zip(live, kvs)), p, done)
    if len(kvs) < len(live) and not cut:
        _answer_empty(tr, qk, live[len(kvs):], p, done)
    done.restored = recover(tr, qk, cutoff_us)
    done.more = done.more or done.restored == RECOVER_BATCH
    if done.dropped or done.served or done.answered_empty or done.restored:
        expire_receipts(tr, qk, now_us)
    return done


def _live(tr: Any, requests: Any, waiting: list, cutoff_us: int, done: Round) -> list[Live]:
    """The requests still worth serving; those whose owner gave up long ago are dropped."""
    live: list[Live] = []
    for kv in waiting:
        key = bytes(kv.key)
        (deadline_us,) = fdb.tuple.unpack(bytes(kv.value))
        if deadline_us < cutoff_us:  # its owner gave up long ago, or died: drop it
            tr.add_read_conflict_key(key)
            del tr[key]
            done.dropped += 1
        else:
            live.append((key, requests.unpack(key)[1], deadline_us))
    return live


def _serve(tr: Any, qk: keys.QueueKeys, pairs: list[tuple[Live, Any]], p: Pop | None, done: Round) -> None:
    """Hand each request its item: the owner's result, or for the calling pop its receipt."""
    for (key, token, deadline_us), kv in pairs:
        item_key = bytes(kv.key)
        elements = qk.items.unpack(item_key)
        tr.add_read_conflict_key(item_key)
        priority, stamp, meta = visibility.take_ready(tr, qk, item_key)
        if key is not None:
            tr.add_read_conflict_key(key)
            del tr[key]
        if p is not None and token == p.token:
            done.mine = decode_item(qk, kv)
            dedup.consumed(tr, qk, priority, stamp, meta)
            tr[p.receipt_key] = p.receipt(done.mine)
        else:  # its dedup key stays held until the owner collects it (or it goes back)
            tr[qk.results.pack((deadline_us, token, RESULT_ITEM) + tuple(elements))] = bytes(kv.value)
        done.served += 1
    if done.served:
        tr.add(qk.counter(keys.SIZE), counter_bytes(-done.served))
        tr.add(qk.counter(keys.POPPED), counter_bytes(done.served))
        activity.count(tr, qk, activity.now_micros(), activity.POPPED, done.served)


def _answer_empty(tr: Any, qk: keys.QueueKeys, unserved: list[Live], p: Pop | None, done: Round) -> None:
    """The queue ran out. "Empty" must still hold at commit: any item appearing conflicts."""
    items = qk.items.range()
    tr.add_read_conflict_range(items.start, items.stop)
    for key, token, deadline_us in unserved:
        if key is not None:
            tr.add_read_conflict_key(key)
            del tr[key]
        if p is not None and token == p.token:
            done.mine = EMPTY
        else:
            tr[qk.results.pack((deadline_us, token, RESULT_EMPTY))] = b""
        done.answered_empty += 1
