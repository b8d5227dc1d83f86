"""Fulfil rounds of high-contention pops: one transaction hands items to waiting requests, in order.

A round snapshot-reads up to :data:`ROUND_REQUESTS` requests of one end and as many items from
that end in pop order, pairs them and, for each pair, adds a read conflict on the exact request
and item keys, clears both, writes the owner's result and rings the owner's bell. So it
conflicts only with transactions that took one of *its* items or touched one of *its* requests.
A leading round (run by the caller the ``lead`` key names, or by one that finds nobody leading)
also hands the rounds on: to the last request it answered, whose owner runs the next round
before it collects, or to nobody.

Pops and claims run the same rounds on desks of their own (``staging``); a :class:`Kind` says
what differs: what serving a request writes (an item to collect, or a lease), and what a round
clears up after owners that died (``recovery.py`` for pops, ``claimrounds.py`` for claims).
``contention.py`` has the pops' protocol, ``hcclaims.py`` the claims'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from django_fdbqueue.fdbapi import RETRYABLE_CODES, ErrorCode, FDBError, count_retry, remember_commit, tuples

from . import dedup, keys, kept, tally, visibility
from .catalog import Entry, counter_bytes, require
from .items import BATCH_BYTES, decode_item
from .reading import head_read, walk
from .popper import EMPTY, Outcome, Pop
from .staging import LEAD_SECONDS, Desk, Staged, pop_desk
from ..records import Item, Lease, now_micros
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
__all__ = ["LEAD_SECONDS", "ROUND_BYTES", "ROUND_REQUESTS", "Kind", "Live", "Round", "SnapshotReads", "fulfil_in"]


class Live(NamedTuple):
    """A request a round serves: its key, its owner's token and deadline, and what else it carries."""

    key: bytes | None
    token: bytes
    deadline_us: int
    extra: tuple[Any, ...] = ()


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
    #: What it gave the calling pop's (or claim's) own request: an Item (a Lease), EMPTY, or None.
    mine: Item | Lease | Outcome | None = None
    #: A leading round found another pop leading: it did nothing.
    led_elsewhere: bool = False


class Kind:
    """What rounds do for pops; ``claimrounds.ClaimRounds`` overrides it for claims."""

    #: The leader's own answer goes to it directly (a pop: no result to collect, its receipt
    #: written instead); else the leader's answer is written as a result, like everyone's.
    direct = True
    #: Payload bytes one round moves at most.
    round_bytes = ROUND_BYTES

    def desk(self, qk: keys.QueueKeys) -> Desk:
        return pop_desk(qk)

    def serve(
        self,
        tr: Any,
        entry: Entry,
        qk: keys.QueueKeys,
        pairs: list[tuple[Live, Any]],
        p: Any,
        done: "Round",
        now_us: int,
    ) -> None:
        """Hand each request of ``pairs`` its item (a key-value); the leader's answer is ``done.mine``."""
        _serve(tr, qk, pairs, p, done)

    def recover(self, tr: Any, qk: keys.QueueKeys, cutoff_us: int) -> tuple[int, bool]:
        """Clear up after owners long gone (for pops: put their results' items back)."""
        return recover(tr, qk, cutoff_us)

    def tidy(self, tr: Any, qk: keys.QueueKeys, now_us: int) -> None:
        """After a round that did something (for pops: old receipts go)."""
        expire_receipts(tr, qk, now_us)


POPS = Kind()


def fulfil_in(
    tr: Any,
    entry: Entry,
    qk: keys.QueueKeys,
    end: str,
    p: Staged | None,
    now_us: int,
    *,
    lead: bool = False,
    kind: Kind = POPS,
) -> Round:
    """The body of a round at ``now_us`` (see the module docstring); ``committed`` is left to the caller.

    Its reads (the ``lead`` key, what is due, the requests, the first items) are sent together:
    one round trip unless something was due. ``lead`` (the calling ``p`` leads): with an
    ordinary read of the ``lead`` key the round checks that no other caller leads; then it serves
    what it sees, in order, names the last request it answered (not ``p``'s own) in the ``lead``
    key and rings its lead bell: that caller runs the next round before it collects. Having
    answered nobody else, it clears the ``lead`` key, with a read conflict on the requests, so
    that a caller registering meanwhile makes it run again and be seen.
    """
    done = Round()
    desk = kind.desk(qk)
    reads = SnapshotReads(tr)
    holder = tr[desk.lead(end)] if lead else None
    due = visibility.due(tr, qk, now_us)
    r = desk.requests(end).range()
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
    live = _live(tr, desk.requests(end), waiting, cutoff_us, done)
    kvs: list[Any] = []
    cut = False
    if live:
        if head is not None and end == "min":
            head = list(head)[: len(live)]
        kvs, cut = walk(reads, qk, end, len(live), max_bytes=kind.round_bytes, head=head)
        done.more = done.more or cut
    kind.serve(tr, entry, qk, list(zip(live, kvs)), p, done, now_us)
    if len(kvs) < len(live) and not cut:
        _answer_empty(tr, qk, desk, live[len(kvs) :], p, done, kind.direct)
    if lead:
        _hand_on(tr, desk, end, _heir(live, p), now_us)
    done.restored, full = kind.recover(tr, qk, cutoff_us)
    done.more = done.more or full
    if done.dropped or done.served or done.answered_empty or done.restored:
        kind.tidy(tr, qk, now_us)
    return done


def attempt(db: Any, name: str, end: str, p: Staged | None, *, lead: bool = False, kind: Kind = POPS) -> Round:
    """One round, one attempt: a conflict is not retried (someone else did or will do the work).

    ``p`` is the calling pop or claim (None for a maintenance round). A commit in doubt is
    reported to ``p.doubt`` with what the round would have given it.
    """
    tr = db.create_transaction()
    done = Round()
    try:
        if p is not None:
            qk = p.bind(tr)
            entry = p.entry
            assert entry is not None  # set by bind
        else:
            entry, qk = require(tr, name, fifo_ok=end == "min")
        done = fulfil_in(tr, entry, qk, end, p, now_micros(), lead=lead, kind=kind)
        if done.led_elsewhere:
            return done
        tr.commit().wait()  # trivial when the round found nothing to do
        remember_commit(db, tr)  # the thread's next pop or claim may start from it (it sees the round)
        done.committed = True
        return done
    except FDBError as error:
        if error.code not in RETRYABLE_CODES:
            raise
        count_retry(error.code)
        if p is not None and error.code == ErrorCode.COMMIT_UNKNOWN_RESULT:
            p.doubt(done.mine)
        if lead:
            tr.on_error(error).wait()  # its leader tries again: after the back-off, not at once
        return Round()


def _heir(live: list[Live], p: Staged | None) -> Live | None:
    """Who runs the next round: the last request answered that is not the leader's own (every
    request seen is answered, with an item or "empty", unless the byte budget cut the round)."""
    others = [request for request in live if p is None or request.token != p.token]
    return others[-1] if others else None


def _hand_on(tr: Any, desk: Desk, end: str, heir: Live | None, now_us: int) -> None:
    """Name the heir in the ``lead`` key and ring its bell; with none, leave the rounds to nobody."""
    if heir is not None:
        tr[desk.lead(end)] = tuples.pack((heir.token, now_us + micros(LEAD_SECONDS)))
        tr[desk.results.pack((heir.deadline_us, heir.token, RESULT_LEAD_BELL))] = b""
        return
    r = desk.requests(end).range()
    tr.add_read_conflict_range(r.start, r.stop)  # a registration now must see a leader, or be seen
    del tr[desk.lead(end)]


def _live(tr: Any, requests: Any, waiting: list[Any], cutoff_us: int, done: Round) -> list[Live]:
    """The requests still worth serving; those whose owner gave up long ago are dropped."""
    live: list[Live] = []
    for kv in waiting:
        key = bytes(kv.key)
        deadline_us, *extra = tuples.unpack(bytes(kv.value))
        if deadline_us < cutoff_us:  # its owner gave up long ago, or died: drop it
            tr.add_read_conflict_key(key)
            del tr[key]
            done.dropped += 1
        else:
            live.append(Live(key, requests.unpack(key)[1], deadline_us, tuple(extra)))
    return live


def _serve(tr: Any, qk: keys.QueueKeys, pairs: list[tuple[Live, Any]], p: Pop | None, done: Round) -> None:
    """Hand each request its item: the owner's result, or for the calling pop its receipt."""
    for (key, token, deadline_us, _extra), kv in pairs:
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


def _answer_empty(
    tr: Any, qk: keys.QueueKeys, desk: Desk, unserved: list[Live], p: Staged | None, done: Round, direct: bool
) -> None:
    """The queue ran out. "Empty" must still hold at commit: any item appearing conflicts.

    The leader's own answer is ``done.mine``; it is also written as a result unless ``direct``.
    """
    items = qk.items.range()
    tr.add_read_conflict_range(items.start, items.stop)
    for request in unserved:
        if request.key is not None:
            tr.add_read_conflict_key(request.key)
            del tr[request.key]
        mine = p is not None and request.token == p.token
        if mine:
            done.mine = EMPTY
        if not (mine and direct):
            tr[desk.results.pack((request.deadline_us, request.token, RESULT_EMPTY))] = b""
        if not mine:
            tr[desk.results.pack((request.deadline_us, request.token, RESULT_BELL))] = b""
        done.answered_empty += 1
