"""Fulfil rounds of high-contention pops: one transaction hands items to waiting requests, in order.

A round snapshot-reads up to :data:`ROUND_REQUESTS` requests of one end and as many items from
that end in pop order, pairs them and, for each pair, adds a read conflict on the exact request
and item keys, clears both, writes the owner's result and rings the owner's bell. So it
conflicts only with transactions that took one of *its* items or touched one of *its* requests.
A leading round (run by the pop the ``lead`` key names, or by one that finds nobody leading)
also hands the rounds on: to the last request it answered, whose owner runs the next round
before it collects, or to nobody.
``contention.py`` has the protocol; ``recovery.py`` what a round also clears up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django_fdbqueue.fdbapi import fdb

from . import dedup, keys, kept, tally, visibility
from .catalog import Entry, counter_bytes
from .items import BATCH_BYTES, decode_item
from .reading import head_read, walk
from .popper import EMPTY, Outcome, Pop
from ..records import Item, now_micros
from .recovery import (
    GRACE_SECONDS,
    RESULT_BELL,
    RESULT_EMPTY,
    RESULT_ITEM,
    RESULT_LEAD_BELL,
    expire_receipts,
    micros,
    recover,
)

#: Requests one fulfil round serves at most (and so items it takes, within ROUND_BYTES).
ROUND_REQUESTS = 64
#: Payload bytes one round moves at most: FoundationDB advises transactions near 1 MB.
ROUND_BYTES = BATCH_BYTES
#: How long the pop a round names in the ``lead`` key has to run its own round before any waiting
#: pop may run one instead (it may have died): a few commits' time, well under a pop's timeout.
LEAD_SECONDS = 0.5


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
    #: A leading round found another pop leading: it did nothing.
    led_elsewhere: bool = False


def fulfil_in(
    tr: Any, entry: Entry, qk: keys.QueueKeys, end: str, p: Pop | None, now_us: int, *, lead: bool = False
) -> Round:
    """The body of a round at ``now_us`` (see the module docstring); ``committed`` is left to the caller.

    Its reads (the ``lead`` key, what is due, the requests, the first items) are sent together:
    one round trip unless something was due. ``lead`` (the calling pop ``p`` leads): with an
    ordinary read of the ``lead`` key the round checks that no other pop leads; then it serves
    what it sees, in order, names the last request it answered (not ``p``'s own) in the ``lead``
    key and rings its lead bell: that pop runs the next round before it collects. Having
    answered nobody else, it clears the ``lead`` key, with a read conflict on the requests, so
    that a pop registering meanwhile makes it run again and be seen.
    """
    done = Round()
    reads = SnapshotReads(tr)
    holder = tr[qk.lead(end)] if lead else None
    due = visibility.due(tr, qk, now_us)
    r = qk.requests(end).range()
    waiting_read = tr.snapshot.get_range(r.start, r.stop, limit=ROUND_REQUESTS)
    head = head_read(reads, qk, end, ROUND_REQUESTS)
    if lead:
        assert p is not None
        if not p.may_lead(holder, now_us):
            done.led_elsewhere = True
            return done
        del tr[p.lead_bell]
    cutoff_us = now_us - micros(GRACE_SECONDS)
    if visibility.promote(tr, qk, entry, now_us, rows=due):
        head = None  # items moved in: the walk reads again
    waiting = list(waiting_read)
    done.more = len(waiting) == ROUND_REQUESTS
    live = _live(tr, qk.requests(end), waiting, cutoff_us, done)
    kvs: list[Any] = []
    cut = False
    if live:
        if head is not None and end == "min":
            head = list(head)[: len(live)]
        kvs, cut = walk(reads, qk, end, len(live), max_bytes=ROUND_BYTES, head=head)
        done.more = done.more or cut
    _serve(tr, qk, list(zip(live, kvs)), p, done)
    if len(kvs) < len(live) and not cut:
        _answer_empty(tr, qk, live[len(kvs) :], p, done)
    if lead:
        _hand_on(tr, qk, end, _heir(live, p), now_us)
    done.restored, full = recover(tr, qk, cutoff_us)
    done.more = done.more or full
    if done.dropped or done.served or done.answered_empty or done.restored:
        expire_receipts(tr, qk, now_us)
    return done


def _heir(live: list[Live], p: Pop | None) -> Live | None:
    """Who runs the next round: the last request answered that is not the leader's own (every
    request seen is answered, with an item or "empty", unless the byte budget cut the round)."""
    for request in reversed(live):
        if p is None or request[1] != p.token:
            return request
    return None


def _hand_on(tr: Any, qk: keys.QueueKeys, end: str, heir: Live | None, now_us: int) -> None:
    """Name the heir in the ``lead`` key and ring its bell; with none, leave the rounds to nobody."""
    if heir is not None:
        _key, token, deadline_us = heir
        tr[qk.lead(end)] = fdb.tuple.pack((token, now_us + micros(LEAD_SECONDS)))
        tr[qk.results.pack((deadline_us, token, RESULT_LEAD_BELL))] = b""
        return
    r = qk.requests(end).range()
    tr.add_read_conflict_range(r.start, r.stop)  # a registration now must see a leader, or be seen
    del tr[qk.lead(end)]


def _live(tr: Any, requests: Any, waiting: list[Any], cutoff_us: int, done: Round) -> list[Live]:
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
            kept.note(qk, elements, kv.value)  # for an async pop whose caller may go away
            dedup.consumed(tr, qk, priority, stamp, meta)
            tr[p.receipt_key] = p.receipt(done.mine)
        else:  # its dedup key stays held until the owner collects it (or it goes back)
            tr[qk.results.pack((deadline_us, token, RESULT_ITEM) + tuple(elements))] = bytes(kv.value)
            tr[qk.results.pack((deadline_us, token, RESULT_BELL))] = b""
        done.served += 1
    if done.served:
        tr.add(qk.counter(keys.SIZE), counter_bytes(-done.served))
        tr.add(qk.counter(keys.POPPED), counter_bytes(done.served))
        tally.count(tr, qk, now_micros(), tally.POPPED, done.served)


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
            tr[qk.results.pack((deadline_us, token, RESULT_BELL))] = b""
        done.answered_empty += 1
