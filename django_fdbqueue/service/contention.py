"""High-contention pops: many clients popping one queue without fighting over its first item.

Why
===

A plain pop reads the first item of the queue with an ordinary read and clears it. Pops that
overlap in time read the same first item, so all but one fail with 1020 (``not_committed``),
back off and retry, and the retries can collide again: the more clients pop one queue, and the
longer a transaction takes (on a cluster, network round trips), the more work is thrown away.
FoundationDB's priority-queue recipe suggests the cure implemented here: *staging*. A pop that
keeps losing does not race for an item any more; it files a request, and the next "fulfil
round", run by any popper, hands items to every waiting request in one transaction. Pops then
meet in batches instead of fighting over each item.

``pop(db, name, end)`` below is what ``service.pop(..., mode="high-contention")`` calls.

Data model
==========

Under the queue's ``"r"`` subspace (see ``keys.py``)::

    r / end / vs / token                   -> (deadline_us,)       a waiting request
    r / "res" / deadline_us / token / 1 / priority / vs / enqueued_at_us / codec -> payload
    r / "res" / deadline_us / token / 0    -> b""                  "the queue was empty"
    r / "rcpt" / epoch / client            -> (token, item_id)     a receipt

* Every pop call picks a random 16-byte ``token`` and a ``deadline`` (wall clock, microseconds).
* A **request** is written with ``set_versionstamped_key``: its key holds the versionstamp of the
  commit that registered it, so requests are ordered by registration commit, exactly and without
  randomness (the recipe's "semi-ordered set", made fully ordered). ``end`` ("min" or "max")
  keeps the two ends of a double-ended queue apart.
* A **result** is keyed by the owner's deadline and token, both of which the owner knows before
  it registers, and then by the item's own key elements. So the owner finds its result with one
  range read even when it never learned its request's versionstamp; the item can be put back at
  exactly its old key; two results for one owner (which the protocol never produces) could never
  overwrite each other; and the results whose owners' deadlines passed are one range read from
  the start of ``r/"res"``. The value is the item's payload, byte for byte, so it fits in a value
  exactly as the item did.
* A **receipt** is written by every transaction that hands an item to the caller running it:
  one slot per client thread (a random id per thread of each process), overwritten by each of
  its pops, so it costs one write per pop and no clean-up. It is how a retry after
  ``commit_unknown_result`` (1021) learns that its earlier attempt did commit (FoundationDB's
  documented idempotency pattern). Slots are grouped by the hour of their pop's deadline, and a
  blind ``clear_range`` of the hours before the previous one (no read, so it conflicts with
  nothing) rides along in fulfil rounds and in some plain pops.

Protocol
========

1. **Arrive.** One transaction snapshot-reads the requests waiting at ``end``. If there are
   none, it pops as a plain pop does (the service's ``take``: an ordinary read of the first
   item, so it conflicts exactly like a plain pop) and writes its receipt: uncontended, a pop
   is this one transaction. If requests are waiting, it runs a fulfil round (step 3) that
   serves them and then the newcomer itself, unregistered, with the next item: the waiting pops
   keep their turn, and the newcomer is served in the same commit instead of queueing behind
   them. The look is a snapshot read because a request arriving meanwhile does not make this
   pop wrong, and conflicting with every registration would bring back the contention we avoid.
2. **Register.** An arriving pop whose attempts conflict (1020) retries with ``on_error``'s
   back-off, like a plain pop; after :data:`STAGE_AFTER_CONFLICTS` conflicts it stops racing
   and writes its request (in a fresh transaction, so that the back-off and TIMEOUT budget the
   lost races used up are not held against it). The request's key is learned after the commit
   from ``tr.get_versionstamp()``.
3. **Fulfil rounds.** One transaction reads up to :data:`ROUND_REQUESTS` requests of ``end``
   and as many items from ``end`` in pop order, both with snapshot reads (the service's
   ``walk_min`` / ``walk_max`` seen through snapshot reads), pairs them in order (an arriving
   pop comes last) and, for each pair, adds a read conflict on the exact request key and the
   exact item key, clears the item (item key and order index), clears the request and writes
   the owner's result (or, for the pop running the round, only its receipt: the item is
   returned at commit). Counters move with atomic adds, as in a plain pop. Snapshot reads plus
   per-key conflicts mean that the round conflicts with a transaction that took one of *its*
   items or touched one of *its* requests, not with pushes, registrations or pops elsewhere in
   the queue. (One conservative exception, FoundationDB's own: a versionstamped key reserves
   every key from its transaction's read version upwards, so a push or registration that began
   before an item or request we take was committed, and commits after our read, conflicts with
   us; the round is simply redone.) When the queue runs out (the walk returned fewer items than
   requests, and not because of the byte
   budget), the surplus requests are answered "empty", after a read conflict on the whole items
   range: a push that commits before the round conflicts with it, so "empty" is true at commit.
   Any popper fulfils anyone's requests; a round that conflicts is simply not retried (another
   round won, or the next one will do the work).
4. **Wait.** After a round, a pop whose request is still waiting sets a watch on its own
   request key, in a transaction of its own that only reads (a watch reads its key with an
   ordinary read; in a read-write transaction that read could conflict, and would make the
   other work retry), and waits until the watch fires (the request was served: its key was
   cleared) or a short, jittered timeout (:data:`WAIT_SECONDS`) passes, after which it runs a
   round itself, since the poppers that would have served it may have died. Nobody spins.
5. **Collect.** Before setting the watch, that transaction reads the pop's result range. If a
   result is there, it clears it instead (writing the receipt) and commits: its item is
   returned, or None for an "empty" result.

Abandonment
===========

A popper may die at any point after registering. Requests and results therefore carry the
owner's deadline. Fulfil rounds drop requests whose deadline passed more than
:data:`GRACE_SECONDS` ago, and put the items of results unclaimed that long back into the queue,
*at their original keys* (so they return to their old place in the order) with the counters
corrected (size +1, popped -1) and the queue's wake-up key touched, so blocking pops (``wait=``)
see them at once. An item waiting in a result is not yet consumed for its ``dedup_key``: like a
leased item, it holds the key until its owner collects it, and an item put back holds it as
any queued item does (see ``dedup.py``). The grace absorbs clock differences between clients: clocks of
all popping machines must agree within it. A pop that reaches its own deadline withdraws: one
transaction clears its request, or, if a result was already written for it, takes that result
(an item is never dropped because its popper gave up) and then raises ``FDBError`` 1031
(``transaction_timed_out``), the error a plain pop raises when the database's TIMEOUT expires.

Exactly once
============

Every item is returned to exactly one caller, or stays in (or returns to) the queue:

* Item keys are taken only with a read conflict on the exact key (rounds) or the plain pop's
  ordinary read (fast path), so two transactions never both take one item.
* A result is cleared by its owner or by recovery, each with a read conflict on it, so only one
  of them can get it.
* ``commit_unknown_result`` (1021) says an attempt may or may not have committed. FoundationDB's
  client, before it reports 1021, commits a small transaction that conflicts with the attempt
  (``commitDummyTransaction`` in its ``tryCommit``), so the attempt can no longer commit later:
  a retry's reads see its effects, or it never happened. (The embedded engine decides at once.)
  On that basis each step checks before it acts again:

  - a transaction that hands the caller an item (a fast-path pop, an arriving pop's combined
    round, a staged pop's own round, a collect, a withdrawal that finds a result) also writes
    the caller thread's **receipt**, ``(token, item id)``; its retry reads the receipt first and,
    if it names this pop and an item an attempt in doubt took, returns that item;
  - a **registration** retried after 1021 first looks (snapshot reads) for a request or a result
    carrying its token, so one caller never has two requests;
  - a **round** that served others needs nothing: the next round reads the state afresh;
  - an "empty" answer in doubt is settled by the request: still there means not answered.

  Were a caller ever to end up with two requests, the extra one would be served into a result
  nobody collects, and recovery would put the item back after the deadline: an item can be
  *delayed* by a lost caller, never lost or duplicated.
* What can still lose an item is what loses one in any FoundationDB application: a commit that
  fails with 1031 (``transaction_timed_out``) or 1025 (cancelled) has an unknown outcome too,
  without that guarantee, and is raised to the caller rather than retried. And a receipt is kept
  for one to two hours (:data:`RECEIPT_EPOCH_SECONDS`) after its pop's deadline: a retry loop
  lasting longer could not tell.

Order
=====

* Requests are served in the order their registrations committed; within a round, items leave
  the queue in pop order and go to requests in request order, so an earlier request gets an
  earlier item.
* A round works from its snapshot. For a FIFO queue that is exact: a push always lands behind
  every item the snapshot saw, so items still leave in push order. For a priority queue, an item
  pushed *ahead* of the round's items (a more urgent priority) after its snapshot does not
  conflict with it: the round hands out the items it saw, and the newcomer goes to the next
  round (a plain pop would have retried and taken the newcomer).
* Each caller's successive pops return items in queue order (its next pop starts after its
  previous one returned, so the transaction that serves it sees the queue without the earlier
  items), unless items are pushed ahead of them as above.
* Items put back by recovery return to their old place, ahead of items that were popped while
  they were away.
* Arriving pops never overtake waiting requests: a pop takes the plain fast path only when no
  request is waiting (as of its snapshot), and otherwise serves the waiting requests first.

Costs
=====

Uncontended, a pop is one transaction, like a plain pop, plus a snapshot read of the (empty)
request range and a receipt write. Contended, a pop is served by an arriving pop's round (one
commit for several pops) or, after repeated conflicts, is a registration, a share of a round,
and (unless its own round served it) a check and a collect: more commits per item than a plain
pop, in exchange for fewer failed ones. Which wins depends on what a conflict costs: on a
cluster, a network round trip per lost race; on the embedded engine, whose commits are
serialized in one SQLite file and whose conflicts are detected cheaply, very little: there,
plain pops lose few races and this mode measured about a fifth slower than plain pops, at one
client and at eight. The benchmark (``manage.py fdbqueue bench --strategy high-contention``)
measures it on a given store; ``mode="plain"`` stays the default until it says otherwise.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django_fdbqueue.exceptions import InvalidArgument, QueueNotFound
from django_fdbqueue.fdbapi import (
    RETRYABLE_CODES,
    ErrorCode,
    FDBError,
    _count_retry,
    bounded,
    fdb,
    is_transaction,
    make_error,
)

from . import dedup, keys, visibility
from .waiting import wait_on
from .catalog import Entry, counter_bytes, first, require
from .items import BATCH_BYTES, decode_item, take, walk
from .records import Item, now_micros

__all__ = ["DEFAULT_TIMEOUT", "Round", "SnapshotReads", "pop", "fulfil"]

#: Seconds a high-contention pop may take before it withdraws (FoundationDB's transaction life).
DEFAULT_TIMEOUT = 5.0
#: Requests one fulfil round serves at most (and so items it takes, within ROUND_BYTES).
ROUND_REQUESTS = 64
#: Payload bytes one round moves at most: FoundationDB advises transactions near 1 MB.
ROUND_BYTES = BATCH_BYTES
#: Expired results one round puts back at most (the rest wait for the next round).
RECOVER_BATCH = 16
#: How long after a deadline others drop its request or put its result back: the allowed clock skew.
GRACE_SECONDS = 5.0
#: Receipts are grouped by the hour ("epoch") of their pop's deadline; epochs older than the
#: previous one are cleared, so a receipt lives one to two hours after its pop's deadline.
RECEIPT_EPOCH_SECONDS = 3600
#: Bounds of one wait for a watch before running a round again (jittered, so waiters spread).
WAIT_SECONDS = (0.05, 0.15)
#: One fast-path pop in this many also clears old receipt epochs (rounds always do).
EXPIRE_RECEIPTS_EVERY = 64
#: Conflicting attempts after which an arriving pop registers a request instead of retrying.
#: The recipe registers after the first. On the embedded engine (one writer, conflicts cheap)
#: every staged pop costs more than the retries it saves, so fewer stagings are faster there;
#: on a cluster a lost attempt costs a network round trip. See the module docstring's Costs.
STAGE_AFTER_CONFLICTS = 2
TOKEN_BYTES = 16

_ITEM = 1
_EMPTY = 0
_Versionstamp = fdb.tuple.Versionstamp


class _Outcome:
    """Sentinels for what a step decided (distinct from an Item and from None)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


STAGED = _Outcome("staged")  # a request is registered: wait for a round to serve it
EMPTY = _Outcome("empty")  # the pop was answered "the queue is empty"
GONE = _Outcome("gone")  # neither request nor result: dropped after the deadline, or withdrawn


def _micros(seconds: float) -> int:
    return int(seconds * 1_000_000)


_client = threading.local()


def _client_id() -> bytes:
    """Random and fixed per thread of a process: the name of this client's receipt slot.

    A thread runs one pop at a time, so each pop can overwrite its thread's receipt instead of
    writing a new key per pop (and clearing it later). Checked against the process id, so a
    forked child never shares its parent's slot.
    """
    pid = os.getpid()
    if getattr(_client, "pid", None) != pid:
        _client.pid = pid
        _client.id = os.urandom(8)
    return _client.id


# --- one caller's pop -----------------------------------------------------------------------


@dataclass
class _Pop:
    """One call: its identity (token, deadline), its request, and what is in doubt after a 1021.

    ``candidates`` are the items that attempts ending in ``commit_unknown_result`` would have
    handed us, by item id; the receipt (whose value names the pop and the item) says which one,
    if any, did. ``maybe_empty`` says an attempt that would have answered us "empty" may have
    committed; it only decides what a request gone *without* a result means ("answered empty";
    the other story, a request dropped after its deadline, loses nothing by returning None).
    """

    name: str
    end: str
    deadline_us: int
    deadline: float  # the same deadline on this process's monotonic clock
    token: bytes = field(default_factory=lambda: os.urandom(TOKEN_BYTES))
    qk: keys.QueueKeys | None = None
    entry: Entry | None = None
    request_key: bytes | None = None
    candidates: dict[str, Item] = field(default_factory=dict)
    maybe_empty: bool = False
    client: bytes = field(default_factory=_client_id)

    def bind(self, tr: Any) -> keys.QueueKeys:
        """Read the catalog entry (an ordinary read: a racing delete makes us retry)."""
        entry, qk = require(tr, self.name, fifo_ok=self.end == "min")
        self.entry = entry
        if self.qk is None:
            self.qk = qk
        elif self.qk.queue_id != entry.queue_id:
            raise QueueNotFound(f"The queue {self.name!r} was deleted while a pop waited.", name=self.name)
        return qk

    @cached_property
    def receipt_key(self) -> bytes:
        """This thread's receipt slot, in the epoch of this pop's deadline."""
        assert self.qk is not None
        return self.qk.receipts.pack((_epoch(self.deadline_us), self.client))

    def receipt(self, item: Item) -> bytes:
        """The receipt's value: whose pop took which item."""
        return fdb.tuple.pack((self.token, item.id))

    @property
    def results(self) -> slice:
        assert self.qk is not None
        return self.qk.results.range((self.deadline_us, self.token))

    @property
    def in_doubt(self) -> bool:
        return bool(self.candidates) or self.maybe_empty

    def confirm(self, tr: Any) -> Item | None:
        """If an earlier attempt's fate is unknown: the item it took, when its receipt says so.

        A receipt naming another pop (an earlier pop of this thread) or none at all means the
        attempts in doubt did not commit: after reporting 1021 they never will (see "Exactly once").
        """
        if not self.candidates:
            return None
        raw = tr[self.receipt_key]
        present = raw.present()  # may raise (lazily, on a cluster): keep the candidates for the retry
        candidates, self.candidates = self.candidates, {}  # resolved either way
        if present:
            token, item_id = fdb.tuple.unpack(bytes(raw))
            if token == self.token:
                return candidates.get(item_id)
        return None

    def doubt(self, got: Item | _Outcome | None) -> None:
        """An attempt that would have given us `got` ended in 1021."""
        if isinstance(got, Item):
            self.candidates[got.id] = got
        elif got is EMPTY:
            self.maybe_empty = True

    def left(self) -> float:
        return self.deadline - time.monotonic()


def _retry(tr: Any, error: Exception) -> None:
    """Count the error as ``transactional`` does, then back off (or re-raise) as ``on_error`` decides."""
    _count_retry(error.code)  # type: ignore[attr-defined]
    tr.on_error(error).wait()


def _item_from(elements: tuple, payload: Any) -> Item:
    priority, stamp, *rest = elements
    return visibility.item_from(priority, stamp, keys.ItemMeta.from_elements(rest), payload)


def _epoch(micros: int) -> int:
    return micros // _micros(RECEIPT_EPOCH_SECONDS)


def _expire_receipts(tr: Any, qk: keys.QueueKeys, now_us: int) -> None:
    """Blind clear of the receipts of epochs before the previous one: no read, so no conflict."""
    tr.clear_range(qk.receipts.range().start, qk.receipts.pack((_epoch(now_us) - 1,)))


def _put_back(tr: Any, qk: keys.QueueKeys, elements: tuple, payload: Any) -> None:
    """An item returns to its own key (and order index entry), so to its old place in the queue.

    Its dedup key names it again: a push of that key must not store a second copy.
    """
    priority, stamp, *rest = elements
    meta = keys.ItemMeta.from_elements(rest)
    visibility.put_ready(tr, qk, priority, stamp, meta, bytes(payload))
    dedup.restored(tr, qk, priority, stamp, meta)


def _returned(tr: Any, qk: keys.QueueKeys, count: int) -> None:
    """Count `count` put-back items as queued again, and wake blocking pops: items are ready."""
    if count:
        tr.add(qk.counter(keys.SIZE), counter_bytes(count))
        tr.add(qk.counter(keys.POPPED), counter_bytes(-count))
        visibility.wake(tr, qk)


def _consumed(tr: Any, qk: keys.QueueKeys, elements: tuple) -> None:
    """A result's item reached its owner: only now is it consumed for its dedup key."""
    priority, stamp, *rest = elements
    dedup.consumed(tr, qk, priority, stamp, keys.ItemMeta.from_elements(rest))


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


# --- steps 1 and 2: the fast path, or registering a request ----------------------------------


def _find_request(tr: Any, p: _Pop, qk: keys.QueueKeys) -> bool:
    """After a 1021: did our registration commit? A request or a result with our token says so.

    Snapshot reads: the unknown attempt can no longer commit once 1021 is reported (see
    "Exactly once"), so there is nothing to conflict with, and an ordinary read of the whole
    request range would conflict with every registration that reserves its versionstamp there.
    """
    if first(tr.snapshot.get_range(p.results.start, p.results.stop, limit=1)) is not None:
        p.request_key = None  # already served: settling will collect it
        return True
    requests = qk.requests(p.end)
    r = requests.range()
    for kv in tr.snapshot.get_range(r.start, r.stop):
        if requests.unpack(bytes(kv.key))[1] == p.token:
            p.request_key = bytes(kv.key)
            return True
    return False


def _arrive(db: Any, p: _Pop, *, stage: bool = False) -> Item | _Outcome | None:
    """Pop at once (an Item, or None when empty) or, under repeated conflicts, register: STAGED.

    One transaction per attempt. It snapshot-reads the requests waiting at ``end``. If there
    are none, it pops as a plain pop does. If there are, it runs a fulfil round that serves them
    and then itself, unregistered, with the next item: waiting pops keep their turn, and the
    newcomer is served in the same commit. An attempt that conflicts (1020) is retried after
    ``on_error``'s back-off, like a plain pop (which spreads colliding clients apart); after
    :data:`STAGE_AFTER_CONFLICTS` conflicts the pop writes a request instead and waits its turn.
    ``stage=True`` registers directly.
    """
    tr = db.create_transaction()
    conflicts = 0
    unsure_registration = False  # a registration attempt ended in 1021
    while True:
        took: Item | None = None
        registering = False
        try:
            qk = p.bind(tr)
            confirmed = p.confirm(tr)
            if confirmed is not None:
                return confirmed
            if unsure_registration and _find_request(tr, p, qk):
                return STAGED
            requests = qk.requests(p.end)
            done: Round | None = None
            if stage:
                registering = True
                tr.set_versionstamped_key(
                    requests.pack_with_versionstamp((_Versionstamp(), p.token)),
                    fdb.tuple.pack((p.deadline_us,)),
                )
                stamp = tr.get_versionstamp()
            else:
                r = requests.range()
                waiting = list(tr.snapshot.get_range(r.start, r.stop, limit=ROUND_REQUESTS))
                if waiting:
                    done = _fulfil_in(tr, p.entry, qk, p.end, p, waiting=waiting, serve_self=True)
                    took = done.mine if isinstance(done.mine, Item) else None
                else:
                    popped, _cut = take(tr, p.entry, qk, p.end, 1)
                    if popped:
                        took = popped[0]
                        tr[p.receipt_key] = p.receipt(took)
                        if random.randrange(EXPIRE_RECEIPTS_EVERY) == 0:
                            _expire_receipts(tr, qk, now_micros())
            tr.commit().wait()
            if registering:
                p.request_key = requests.pack((_Versionstamp(bytes(stamp.wait()), 0), p.token))
                return STAGED
            if done is not None and done.mine is None:
                tr.reset()  # the round's byte budget ran out before our turn: go again
                continue
            return took
        except FDBError as error:
            if error.code == ErrorCode.COMMIT_UNKNOWN_RESULT:
                if registering:
                    unsure_registration = True
                else:
                    p.doubt(took)  # an "empty" answer to us needs no doubt: we took nothing
            elif error.code == ErrorCode.NOT_COMMITTED and not registering:
                conflicts += 1
                if conflicts >= STAGE_AFTER_CONFLICTS:
                    # Register, in a fresh transaction: the back-off and the TIMEOUT budget
                    # that the lost races used up are not the registration's.
                    _count_retry(error.code)
                    stage = True
                    tr = db.create_transaction()
                    continue
            _retry(tr, error)


# --- step 3: fulfil rounds --------------------------------------------------------------------


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
    mine: Item | _Outcome | None = None


def _recover(tr: Any, qk: keys.QueueKeys, cutoff_us: int) -> int:
    """Put back the items of results whose owner's deadline passed before `cutoff_us`.

    Snapshot-reads the oldest expired results (they sort by deadline) and adds a read conflict
    on each one it clears, so its owner collecting it at the same moment and this recovery
    cannot both succeed. Returns how many items went back.
    """
    results = qk.results
    restored = 0
    for kv in tr.snapshot.get_range(results.range().start, results.pack((cutoff_us,)), limit=RECOVER_BATCH):
        key = bytes(kv.key)
        tr.add_read_conflict_key(key)
        del tr[key]
        parts = results.unpack(key)
        if parts[2] == _ITEM:
            _put_back(tr, qk, parts[3:], kv.value)
            restored += 1
    _returned(tr, qk, restored)
    return restored


def _fulfil_in(tr: Any, entry: Entry, qk: keys.QueueKeys, end: str, p: _Pop | None, *,
               waiting: list | None = None, serve_self: bool = False) -> Round:
    """The body of a round (see the module docstring); ``committed`` is left to the caller.

    ``waiting`` is the snapshot read of the requests when the caller already made it.
    ``serve_self`` adds the calling pop, unregistered, as the last requester: it gets the item
    after everyone waiting (with a receipt), or "empty" if none is left.
    """
    done = Round()
    now_us = now_micros()
    cutoff_us = now_us - _micros(GRACE_SECONDS)
    requests = qk.requests(end)
    visibility.promote(tr, qk, entry, now_us)
    if waiting is None:
        r = requests.range()
        waiting = list(tr.snapshot.get_range(r.start, r.stop, limit=ROUND_REQUESTS))
    done.more = len(waiting) == ROUND_REQUESTS
    live: list[tuple[bytes | None, bytes, int]] = []
    for kv in waiting:
        key = bytes(kv.key)
        (deadline_us,) = fdb.tuple.unpack(bytes(kv.value))
        if deadline_us < cutoff_us:  # its owner gave up long ago, or died: drop it
            tr.add_read_conflict_key(key)
            del tr[key]
            done.dropped += 1
        else:
            live.append((key, requests.unpack(key)[1], deadline_us))
    if serve_self:
        assert p is not None
        live.append((None, p.token, p.deadline_us))  # no key: this pop never registered
    kvs: list[Any] = []
    cut = False
    if live:
        kvs, cut = walk(SnapshotReads(tr), qk, end, len(live), max_bytes=ROUND_BYTES)
        done.more = done.more or cut
    for (key, token, deadline_us), kv in zip(live, kvs):
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
            tr[qk.results.pack((deadline_us, token, _ITEM) + tuple(elements))] = bytes(kv.value)
        done.served += 1
    if done.served:
        tr.add(qk.counter(keys.SIZE), counter_bytes(-done.served))
        tr.add(qk.counter(keys.POPPED), counter_bytes(done.served))
    if len(kvs) < len(live) and not cut:
        # The queue ran out. "Empty" must still hold at commit: any item appearing conflicts.
        items = qk.items.range()
        tr.add_read_conflict_range(items.start, items.stop)
        for key, token, deadline_us in live[len(kvs):]:
            if key is not None:
                tr.add_read_conflict_key(key)
                del tr[key]
            if p is not None and token == p.token:
                done.mine = EMPTY
            else:
                tr[qk.results.pack((deadline_us, token, _EMPTY))] = b""
            done.answered_empty += 1
    done.restored = _recover(tr, qk, cutoff_us)
    done.more = done.more or done.restored == RECOVER_BATCH
    if done.dropped or done.served or done.answered_empty or done.restored:
        _expire_receipts(tr, qk, now_us)
    return done


def _fulfil(db: Any, name: str, end: str, p: _Pop | None) -> Round:
    """One round, one attempt: a conflict is not retried (someone else did or will do the work)."""
    tr = db.create_transaction()
    done = Round()
    try:
        if p is not None:
            qk = p.bind(tr)
            entry = p.entry
        else:
            entry, qk = require(tr, name, fifo_ok=end == "min")
        done = _fulfil_in(tr, entry, qk, end, p)
        tr.commit().wait()  # trivial when the round found nothing to do
        done.committed = True
        return done
    except FDBError as error:
        if error.code not in RETRYABLE_CODES:
            raise
        _count_retry(error.code)
        if p is not None and error.code == ErrorCode.COMMIT_UNKNOWN_RESULT:
            p.doubt(done.mine)
        return Round()


@bounded
def fulfil(db: Any, name: str, end: str = "min") -> Round:
    """Run one fulfil round for ``end`` of ``name``: serve waiting requests, recover abandoned results.

    Pops run rounds themselves; this is for a maintenance task (or a test) that wants abandoned
    requests and results dealt with when nobody is popping. One attempt: a round that conflicts
    returns ``Round(committed=False)``.
    """
    keys.check_name(name)
    keys.check_end(end)
    if is_transaction(db):
        raise InvalidArgument("fulfil runs its own transaction: pass the database.")
    return _fulfil(db, name, end, None)


# --- steps 4 and 5: wait, collect, withdraw ---------------------------------------------------


def _collect(tr: Any, p: _Pop, qk: keys.QueueKeys, rows: list) -> Item | _Outcome:
    """Clear our results; the item among them (EMPTY if only "empty"). Not committed here."""
    item: Item | None = None
    extra = 0
    for kv in rows:
        key = bytes(kv.key)
        parts = qk.results.unpack(key)
        del tr[key]
        if parts[2] != _ITEM:
            continue
        if item is None:
            item = _item_from(parts[3:], kv.value)
            _consumed(tr, qk, parts[3:])
        else:  # the protocol never gives one pop two items; if it did, the second goes back
            _put_back(tr, qk, parts[3:], kv.value)
            extra += 1
    _returned(tr, qk, extra)
    if item is None:
        return EMPTY
    tr[p.receipt_key] = p.receipt(item)
    return item


def _settle(db: Any, p: _Pop, *, withdraw: bool) -> Any:
    """Collect our result if there is one; else watch our request or, to withdraw, clear it.

    Returns an Item, EMPTY, GONE, or a watch future (the request is still waiting).
    """
    tr = db.create_transaction()
    while True:
        got: Item | _Outcome | None = None
        try:
            qk = p.bind(tr)
            confirmed = p.confirm(tr)
            if confirmed is not None:
                return confirmed
            rows = list(tr.get_range(p.results.start, p.results.stop))
            if rows:
                got = _collect(tr, p, qk, rows)
            elif p.request_key is not None and tr[p.request_key].present():
                if withdraw:
                    del tr[p.request_key]
                    got = GONE
                else:
                    got = tr.watch(p.request_key)
            else:
                # Served and gone: our own round answered "empty" (in doubt until now), or
                # the request was dropped after its deadline.
                got = EMPTY if p.maybe_empty else GONE
            tr.commit().wait()  # read-only while watching, so it never conflicts
            return got
        except FDBError as error:
            if error.code == ErrorCode.COMMIT_UNKNOWN_RESULT and got is not None and not hasattr(got, "on_ready"):
                p.doubt(got)
            _retry(tr, error)


def _finish(got: Item | _Outcome | None) -> Item | None:
    if got is GONE:
        raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)
    if got is EMPTY or got is None:
        return None
    assert isinstance(got, Item)
    return got


# --- the entry point --------------------------------------------------------------------------


def _check_timeout(timeout: object) -> float:
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise InvalidArgument("timeout must be a number of seconds above 0 and at most 3600.")
    return float(timeout)


@bounded
def pop(db: Any, name: str, end: str = "min", *, timeout: float | None = None) -> Item | None:
    """Pop from ``end`` of ``name``, through a staged request when other pops compete.

    Same contract as ``service.pop``: the next item, or None when the queue is empty. It needs
    the database, not a transaction, since it runs several transactions. If it cannot be served
    within ``timeout`` seconds (default :data:`DEFAULT_TIMEOUT`) it withdraws its request and
    raises ``FDBError`` 1031 (``transaction_timed_out``).
    """
    if is_transaction(db):
        raise InvalidArgument(
            "A high-contention pop runs several transactions of its own, so it cannot join an "
            "open transaction: pass the database, or pop with mode='plain' inside a transaction."
        )
    keys.check_name(name)
    keys.check_end(end)
    seconds = _check_timeout(timeout)
    p = _Pop(name, end, now_micros() + _micros(seconds), time.monotonic() + seconds)

    got = _arrive(db, p)
    if got is not STAGED:
        return _finish(got)
    while True:
        done = _fulfil(db, name, end, p)
        if done.mine is not None and done.committed:
            return _finish(done.mine)
        state = _settle(db, p, withdraw=p.left() <= 0)
        if not hasattr(state, "on_ready"):
            return _finish(state)
        if done.committed and done.more:
            state.cancel()  # more waiting than one round serves: run the next one now
            continue
        wait_on(state, min(random.uniform(*WAIT_SECONDS), p.left()))
