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
Four modules share the work: this one has the caller's steps and the entry point, ``popper`` one
pop's identity and what is in doubt, ``rounds`` the fulfil rounds, ``recovery`` the clean-up.

Data model
==========

Under the queue's ``"r"`` subspace (see ``keys.py``)::

    r / end / vs / token                   -> (deadline_us,)       a waiting request
    r / "res" / deadline_us / token / 1 / priority / vs / enqueued_at_us / codec -> payload
    r / "res" / deadline_us / token / 0    -> b""                  "the queue was empty"
    r / "res" / deadline_us / token / 2    -> b""                  its bell: answered
    r / "res" / deadline_us / token / 3    -> b""                  its bell: run the next round
    r / "lead" / end                       -> (token, until_us)    who runs the rounds now
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
  exactly as the item did. Beside its results a request has two **bells**, keys its owner
  watches from the moment it registers: a round writes the first when it answers the request,
  the second when it hands the request's owner the next round.
* The **lead** key names the one pop that runs the rounds of ``end`` now, and until when it
  must have run one before any waiting pop may run one instead.
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
   is this one transaction. If requests are waiting, it registers behind them (step 2) in the
   same transaction: the waiting pops keep their turn. The look is a snapshot read because a
   request arriving meanwhile does not make this pop wrong, and conflicting with every
   registration would bring back the contention we avoid.
2. **Register.** An arriving pop whose attempts conflict (1020) retries with ``on_error``'s
   back-off, like a plain pop; after :data:`STAGE_AFTER_CONFLICTS` conflicts it stops racing
   and writes its request (in a fresh transaction, so that the back-off and TIMEOUT budget the
   lost races used up are not held against it). The request's key is learned after the commit
   from ``tr.get_versionstamp()``. The registering transaction also sets the watches on the
   pop's two bells, and reads the ``lead`` key (a snapshot read): when nobody leads, it names
   itself there, with a read conflict on that key, so that of several pops registering at
   once exactly one leads and the others register again behind it.
3. **Fulfil rounds, one leader at a time.** A round is one transaction. It reads, together,
   the ``lead`` key (an ordinary read: it runs only while the key names its pop, or names
   nobody live), up to :data:`~rounds.ROUND_REQUESTS` requests of ``end`` and as many items from
   ``end`` in pop order, the last two with snapshot reads (the service's ``walk_min`` /
   ``walk_max`` seen through snapshot reads). It pairs them in order and, for each pair, adds
   a read conflict on the exact request key and the exact item key, clears the item (item key
   and order index) and the request, writes the owner's result and rings its answered bell (or,
   for the pop running the round, only writes its receipt: the item is returned at commit).
   Counters move with atomic adds, as in a plain pop. Snapshot reads plus per-key conflicts
   mean that the round conflicts with a transaction that took one of *its* items or touched one
   of *its* requests, not with pushes, registrations or pops elsewhere in the queue. (One
   conservative exception, FoundationDB's own: a versionstamped key reserves every key from its
   transaction's read version upwards, so a push or registration that began before an item or
   request we take was committed, and commits after our read, conflicts with us; the round is
   simply redone.) When the queue runs out (the walk returned fewer items than requests, and
   not because of the byte budget), the surplus requests are answered "empty", after a read
   conflict on the whole items range: a push that commits before the round conflicts with it,
   so "empty" is true at commit. Then the round **hands on**: it names the last request it
   answered (not its own pop's) in the ``lead`` key and rings that request's lead bell. That pop
   runs the next round, serving whoever registered meanwhile, before it collects its own
   result. A round that answered nobody else names nobody, with a read conflict on the whole
   request range: a registration that committed meanwhile, and so may have seen the old leader
   and not named itself, makes the round run again and serve it. So exactly one pop runs rounds
   at any moment, rounds follow each other without colliding, and each serves every request
   that arrived during the one before: the more pops wait, the more one commit serves.
4. **Wait.** A pop whose request is waiting waits for either of its bells, or for a short,
   jittered timeout (:data:`WAIT_SECONDS`). Its lead bell rung, it runs the next round at
   once. Otherwise it settles (step 5): a pop that finds it is named, or that nobody live is
   named (the leader may have died: its turn ran out :data:`~rounds.LEAD_SECONDS` after it was
   named), runs a round itself; one still waiting watches its bells again. Nobody spins.
5. **Collect.** One transaction reads the pop's result range. If a result is there, it clears
   it (and the bells) instead, writing the receipt, and commits: its item is returned, or None
   for an "empty" result.

Abandonment
===========

A popper may die at any point after registering, so requests and results carry the owner's
deadline: rounds drop requests, and put back the items of results, whose deadline passed more
than :data:`GRACE_SECONDS` ago (clocks of popping machines must agree within it), and a pop that
reaches its own deadline withdraws and raises ``FDBError`` 1031. ``recovery.py`` has the details.
A leader that dies (or withdraws) holds up the rounds for at most :data:`~rounds.LEAD_SECONDS`
plus one waiting pop's timeout: then a waiting pop finds the ``lead`` key out of date and leads.

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

  - a transaction that hands the caller an item (a fast-path pop, a leading pop's own round, a
    collect, a withdrawal that finds a result) also writes
    the caller thread's **receipt**, ``(token, item id)``; its retry reads the receipt first and,
    if it names this pop and an item an attempt in doubt took, returns that item;
  - a **registration** retried after 1021 first looks (snapshot reads) for a request or a result
    carrying its token, so one caller never has two requests;
  - a **round** that served others needs nothing: the next round reads the state afresh (a
    hand-on in doubt leaves the ``lead`` key naming either pop: the named one runs the next
    round, or its turn runs out and a waiting pop does);
  - an "empty" answer in doubt is settled by the request: still there means not answered.

  Were a caller ever to end up with two requests, the extra one would be served into a result
  nobody collects, and recovery would put the item back after the deadline: an item can be
  *delayed* by a lost caller, never lost or duplicated.
* What can still lose an item is what loses one in any FoundationDB application: a commit that
  fails with 1031 (``transaction_timed_out``) or 1025 (cancelled) has an unknown outcome too,
  without that guarantee, and is raised to the caller rather than retried. And a receipt is kept
  for one to two hours (``recovery.RECEIPT_EPOCH_SECONDS``) after its pop's deadline: a retry loop
  lasting longer could not tell.

Order
=====

* Requests are served in the order their registrations committed; within a round, items leave
  the queue in pop order and go to requests in request order, so an earlier request gets an
  earlier item. (A leader's own request is one of them: it takes its turn too.)
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
  request is waiting (as of its snapshot), and otherwise registers behind them.

Costs
=====

Uncontended, a pop is one transaction, like a plain pop, plus a snapshot read of the (empty)
request range and a receipt write. Contended, a pop is a registration (which also watches its
bells), a share of one round (whose commit serves every request that arrived during the round
before), and a collect: two commits of its own, and next to no failed ones, where plain pops
lose most of their races. At a real cluster's commit latency that is what lets many poppers
share a queue (docs/explanation/performance.md has the figures); on the embedded engine, whose
commits are serialized in one SQLite file and whose conflicts are detected cheaply, plain pops
lose few races and this mode costs more than it saves. The benchmark
(``manage.py fdbqueue bench --strategy high-contention``) measures it on a given store;
``mode="plain"`` stays the default.
"""

from __future__ import annotations

import random
import time
from typing import Any, cast

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import (
    RETRYABLE_CODES,
    ErrorCode,
    FDBError,
    count_retry,
    bounded,
    fdb,
    is_transaction,
    make_error,
)

from . import keys, kept
from . import checks
from .catalog import Entry, first, require
from .items import take
from .popper import EMPTY, GONE, LEAD, STAGED, Outcome
from .popper import Pop as _Pop
from ..records import Item, now_micros
from .recovery import (
    EXPIRE_RECEIPTS_EVERY,
    GRACE_SECONDS,
    RESULT_ITEM,
    consumed,
    expire_receipts,
    item_from,
    micros,
    put_back,
    returned,
)
from .rounds import LEAD_SECONDS, Round, SnapshotReads, fulfil_in
from . import runtime
from .waiting import AnyOf

__all__ = ["DEFAULT_TIMEOUT", "GRACE_SECONDS", "LEAD_SECONDS", "Round", "SnapshotReads", "pop", "fulfil"]

#: Seconds a high-contention pop may take before it withdraws (FoundationDB's transaction life).
DEFAULT_TIMEOUT = 5.0
#: Bounds of one wait for a watch before running a round again (jittered, so waiters spread).
WAIT_SECONDS = (0.05, 0.15)
#: Conflicting attempts after which an arriving pop registers a request instead of retrying.
#: The recipe registers after the first. On the embedded engine (one writer, conflicts cheap)
#: every staged pop costs more than the retries it saves, so fewer stagings are faster there;
#: on a cluster a lost attempt costs a network round trip. See the module docstring's Costs.
STAGE_AFTER_CONFLICTS = 2

_Versionstamp = fdb.tuple.Versionstamp


def _retry(tr: Any, error: Exception) -> None:
    """Count the error as ``transactional`` does, then back off (or re-raise) as ``on_error`` decides."""
    count_retry(error.code)  # type: ignore[attr-defined]
    tr.on_error(error).wait()


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


def _register(tr: Any, p: _Pop, qk: keys.QueueKeys, requests: Any, lead: Any) -> tuple[Any, bool]:
    """Write our request, keyed by this commit's versionstamp, and watch our bells.

    ``lead`` is the ``lead`` key's value, read as a snapshot: when nobody leads, the registration
    names itself there, with a read conflict on it, so that of several registering at once one
    leads and the others register again behind it. Returns the versionstamp's future and whether
    we named ourselves.
    """
    tr.set_versionstamped_key(
        requests.pack_with_versionstamp((_Versionstamp(), p.token)),
        fdb.tuple.pack((p.deadline_us,)),
    )
    _watch_bells(tr, p)
    now_us = now_micros()
    leads = p.may_lead(lead, now_us)
    if leads:
        tr.add_read_conflict_key(qk.lead(p.end))
        tr[qk.lead(p.end)] = fdb.tuple.pack((p.token, now_us + micros(LEAD_SECONDS)))
    return tr.get_versionstamp(), leads


def _watch_bells(tr: Any, p: _Pop) -> Any:
    """Watch both of our bells (answered; leads next), as one future (``p.watch``)."""
    p.lead_watch = tr.watch(p.lead_bell)
    p.watch = AnyOf(tr.watch(p.bell), p.lead_watch)
    return p.watch


def _take_unless_waiting(tr: Any, p: _Pop, qk: keys.QueueKeys, requests: Any) -> Item | Outcome | None:
    """Pop as a plain pop does when nobody waits (an Item, or None when empty); else STAGED:
    the caller registers, behind the requests already waiting."""
    r = requests.range()
    if first(tr.snapshot.get_range(r.start, r.stop, limit=1)) is not None:
        return STAGED
    popped, _cut = take(tr, cast(Entry, p.entry), qk, p.end, 1)  # bound by the caller
    if not popped:
        return None
    tr[p.receipt_key] = p.receipt(popped[0])
    if random.randrange(EXPIRE_RECEIPTS_EVERY) == 0:
        expire_receipts(tr, qk, now_micros())
    return popped[0]


def _arrive(db: Any, p: _Pop, *, stage: bool = False) -> Item | Outcome | None:
    """Pop at once (an Item, or None when empty), or register a request: STAGED.

    One transaction per attempt. It snapshot-reads the requests waiting at ``end``. If there
    are none, it pops as a plain pop does. If there are, it registers behind them in the same
    attempt: waiting pops keep their turn. An attempt that conflicts (1020) is retried after
    ``on_error``'s back-off, like a plain pop (which spreads colliding clients apart); after
    :data:`STAGE_AFTER_CONFLICTS` conflicts the pop registers instead and waits its turn.
    ``stage=True`` registers directly. A registration that finds nobody leading leads.
    """
    tr = db.create_transaction()
    conflicts = 0
    unsure_registration = False  # a registration attempt ended in 1021
    while True:
        took: Item | Outcome | None = None
        registering = stage
        try:
            qk = p.bind(tr)
            confirmed = p.confirm(tr)
            if confirmed is not None:
                return confirmed
            if unsure_registration and _find_request(tr, p, qk):
                return STAGED
            requests = qk.requests(p.end)
            lead = tr.snapshot[qk.lead(p.end)]  # sent now: read with the requests, if we register
            if not registering:
                took = _take_unless_waiting(tr, p, qk, requests)
                registering = took is STAGED
            if registering:
                stamp, leads = _register(tr, p, qk, requests, lead)
            tr.commit().wait()
            if registering:
                p.request_key = requests.pack((_Versionstamp(bytes(stamp.wait()), 0), p.token))
                p.leads = leads
                return STAGED
            return took
        except FDBError as error:
            p.watch = p.lead_watch = None
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
                    count_retry(error.code)
                    stage = True
                    tr = db.create_transaction()
                    continue
            _retry(tr, error)


# --- step 3: fulfil rounds (the round itself is in rounds.py) ---------------------------------


def _fulfil(db: Any, name: str, end: str, p: _Pop | None, *, lead: bool = False) -> Round:
    """One round, one attempt: a conflict is not retried (someone else did or will do the work)."""
    tr = db.create_transaction()
    done = Round()
    try:
        if p is not None:
            qk = p.bind(tr)
            entry = cast(Entry, p.entry)  # set by bind
        else:
            entry, qk = require(tr, name, fifo_ok=end == "min")
        done = fulfil_in(tr, entry, qk, end, p, now_micros(), lead=lead)
        if done.led_elsewhere:
            return done
        tr.commit().wait()  # trivial when the round found nothing to do
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


@bounded
def fulfil(db: Any, name: str, end: str = "min") -> Round:
    """Run one fulfil round for ``end`` of ``name``: serve waiting requests, recover abandoned results.

    Pops run rounds themselves; this is for a maintenance task (or a test) that wants abandoned
    requests and results dealt with when nobody is popping. One attempt: a round that conflicts
    returns ``Round(committed=False)``.
    """
    checks.check_name(name)
    checks.check_end(end)
    if is_transaction(db):
        raise InvalidArgument("fulfil runs its own transaction: pass the database.")
    return _fulfil(db, name, end, None)


# --- steps 4 and 5: wait, collect, withdraw ---------------------------------------------------


def _collect(tr: Any, p: _Pop, qk: keys.QueueKeys, rows: list[Any]) -> Item | Outcome:
    """Clear our results; the item among them (EMPTY if only "empty"). Not committed here."""
    item: Item | None = None
    extra = 0
    for kv in rows:
        key = bytes(kv.key)
        parts = qk.results.unpack(key)
        del tr[key]
        if parts[2] != RESULT_ITEM:  # "empty", or the bell
            continue
        if item is None:
            item = item_from(parts[3:], kv.value)
            kept.note(qk, parts[3:], kv.value)  # for an async pop whose caller may go away
            consumed(tr, qk, parts[3:])
        else:  # the protocol never gives one pop two items; if it did, the second goes back
            put_back(tr, qk, parts[3:], kv.value)
            extra += 1
    returned(tr, qk, extra)
    if item is None:
        return EMPTY
    tr[p.receipt_key] = p.receipt(item)
    return item


def _settle(db: Any, p: _Pop, *, withdraw: bool) -> Any:
    """Collect our result if there is one; else lead, watch our bell or, to withdraw, clear the request.

    Returns an Item, EMPTY, GONE, LEAD (nobody else runs the rounds, or a round named us), or a
    watch future (the request is still waiting).
    """
    tr = db.create_transaction()
    while True:
        got: Any = None
        try:
            qk = p.bind(tr)
            confirmed = p.confirm(tr)
            if confirmed is not None:
                return confirmed
            lead_key = qk.lead(p.end)
            lead = tr.snapshot[lead_key]
            rows = list(tr.get_range(p.results.start, p.results.stop))
            named = p.named(lead)
            if named and not withdraw:
                got = LEAD  # a round named us: run the next one first, then collect
            elif any(bytes(kv.key) not in (p.bell, p.lead_bell) for kv in rows):  # an answer, not just bells
                got = _collect(tr, p, qk, rows)
            elif p.request_key is not None and tr[p.request_key].present():
                if withdraw:
                    del tr[p.request_key]
                    del tr[p.bell]
                    got = GONE
                elif p.may_lead(lead, now_micros()):
                    got = LEAD  # nobody else runs the rounds: the one who leads may have died
                else:
                    got = _watch_bells(tr, p)
            else:
                # Served and gone: our own round answered "empty" (in doubt until now), or
                # the request was dropped after its deadline.
                got = EMPTY if p.maybe_empty else GONE
            if named and withdraw:
                del tr[lead_key]  # out of time: leave the rounds to whoever finds them unled
            tr.commit().wait()  # read-only while watching, so it never conflicts
            return got
        except FDBError as error:
            if error.code == ErrorCode.COMMIT_UNKNOWN_RESULT and isinstance(got, (Item, Outcome)):
                p.doubt(got)
            _retry(tr, error)


def _rang(watch: Any) -> bool:
    """Did this watch fire because its key changed (not because it failed, or never)?"""
    if watch is None or not watch.is_ready():
        return False
    try:
        watch.wait()
    except FDBError:
        return False
    return True


def _finish(got: Item | Outcome | None) -> Item | None:
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
    checks.check_name(name)
    checks.check_end(end)
    seconds = _check_timeout(timeout)
    p = _Pop(name, end, now_micros() + micros(seconds), time.monotonic() + seconds)

    got = _arrive(db, p)
    if got is not STAGED:
        return _finish(got)
    while True:
        if p.leads:
            p.leads = False
            done = _fulfil(db, name, end, p, lead=True)
            if done.committed and done.mine is not None:
                return _finish(done.mine)
        elif p.watch is not None:
            runtime.wait_on(p.watch, min(random.uniform(*WAIT_SECONDS), p.left()))
            named = _rang(p.lead_watch)
            p.watch = p.lead_watch = None
            if named and p.left() > 0:
                p.leads = True  # handed the next round: run it, no need to look first
                continue
        state = _settle(db, p, withdraw=p.left() <= 0)
        if state is LEAD:
            p.leads = True
        elif state is not p.watch:
            return _finish(state)
