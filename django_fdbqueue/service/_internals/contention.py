"""High-contention pops: many clients popping one queue without fighting over its first item.

FoundationDB's priority-queue recipe's cure, made exact: a pop that keeps losing races files a
request (registered with a versionstamped key, so requests are served in commit order), and one
leader at a time runs fulfil rounds that hand items to every waiting request in one transaction,
then hands the next round on to a pop it answered. Results are keyed by what their owner knows
(deadline, token), receipts let a retry after 1021 find what its first attempt took, and rounds
put back what dead poppers left. The keys are under the queue's ``"r"`` subspace (``keys.py``);
the protocol, its guarantees and their reasons are in docs/explanation/high-contention-pop.md.

``pop(db, name, end)`` below is what ``service.pop(..., mode="high-contention")`` calls. Four
modules share the work: this one has the caller's steps and the entry point, ``popper`` one
pop's identity and what is in doubt, ``rounds`` the fulfil rounds, ``recovery`` the clean-up.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, cast

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import (
    ErrorCode,
    FDBError,
    count_retry,
    bounded,
    is_transaction,
    remember_commit,
)

from . import checks, kept, keys
from .catalog import Entry, first
from .reading import take
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
from .rounds import LEAD_SECONDS, Round, SnapshotReads, attempt
from .staging import answer, check_timeout, find_request, let_go, register, registered, take_turns, watch_bells
from .staging import retry as _retry

#: Lets a pop's bells' watches go (``staging.let_go``); a name of this module's own, which the
#: simulation's tests replace to prove that the leftovers oracle catches watches left behind.
_let_go = let_go

__all__ = ["DEFAULT_TIMEOUT", "GRACE_SECONDS", "LEAD_SECONDS", "Round", "SnapshotReads", "pop", "fulfil"]

#: Seconds a high-contention pop may take before it withdraws (FoundationDB's transaction life).
DEFAULT_TIMEOUT = 5.0
#: Conflicting attempts after which an arriving pop registers a request instead of retrying.
#: The recipe registers after the first. On the embedded engine (one writer, conflicts cheap)
#: every staged pop costs more than the retries it saves, so fewer stagings are faster there;
#: on a cluster a lost attempt costs a network round trip. See the module docstring's Costs.
STAGE_AFTER_CONFLICTS = 2

# --- steps 1 and 2: the fast path, or registering a request ----------------------------------


def _waiting(tr: Any, requests: Any) -> Any:
    """Send the snapshot read of the first request waiting (not waited for)."""
    r = requests.range()
    return tr.snapshot.get_range(r.start, r.stop, limit=1)


def _arrival_reads(tr: Any, p: _Pop, registering: bool) -> Callable[[keys.QueueKeys], tuple[Any, Any]]:
    """What an arriving pop sends with its catalog check (one round trip for all): snapshot reads,
    so no conflicts, of the ``lead`` key (read if it registers) and, unless it registers at once,
    of the first request waiting (``_take_unless_waiting``)."""

    def send(qk: keys.QueueKeys) -> tuple[Any, Any]:
        return tr.snapshot[qk.lead(p.end)], None if registering else _waiting(tr, qk.requests(p.end))

    return send


def _take_unless_waiting(tr: Any, p: _Pop, qk: keys.QueueKeys, waiting: Any) -> Item | Outcome | None:
    """Pop as a plain pop does when nobody waits (an Item, or None when empty); else STAGED:
    the caller registers, behind the requests already waiting (``waiting``: :func:`_waiting`'s read)."""
    if first(waiting) is not None:
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
            qk, (lead, waiting) = p.bind_with(tr, _arrival_reads(tr, p, registering))
            confirmed = p.confirm(tr)
            if confirmed is not None:
                return confirmed
            if unsure_registration and find_request(tr, p):
                return STAGED
            if not registering:
                took = _take_unless_waiting(tr, p, qk, waiting)
                registering = took is STAGED
            if registering:
                stamp, leads = register(tr, p, lead)
            tr.commit().wait()
            remember_commit(db, tr)  # the thread's next pop or claim may start from it (it sees our take)
            if registering:
                registered(p, stamp, leads)
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
    return attempt(db, name, end, p, lead=lead)


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
                    got = watch_bells(tr, p)
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


def _finish(got: Any) -> Item | None:
    return cast("Item | None", answer(got))


# --- the entry point --------------------------------------------------------------------------


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
    seconds = check_timeout(timeout, DEFAULT_TIMEOUT)
    p = _Pop(name, end, now_micros() + micros(seconds), time.monotonic() + seconds)
    try:
        return _serve(db, p)
    except FDBError:
        item = _confirm_apart(db, p)
        if item is None:
            raise
        return item
    finally:
        _let_go(p)


def _confirm_apart(db: Any, p: _Pop) -> Item | None:
    """A step raised (1031, say) after an attempt in doubt: the item that attempt took, if it
    committed. Its receipt is read in a transaction of its own: the failed one's time is spent,
    and nobody else can tell whose the item was."""
    if not p.candidates:
        return None
    try:
        return p.confirm(db.create_transaction())
    except FDBError:
        return None


def _serve(db: Any, p: _Pop) -> Item | None:
    """``pop``'s steps: arrive; then lead, wait for a bell or settle until served."""
    got = _arrive(db, p)
    if got is not STAGED:
        return _finish(got)
    return _finish(take_turns(p, lambda: _lead(db, p), lambda withdraw: _settle(db, p, withdraw=withdraw)))


def _lead(db: Any, p: _Pop) -> Item | Outcome | None:
    """Run the round we lead: our own answer, if it committed (else None: look)."""
    done = _fulfil(db, p.name, p.end, p, lead=True)
    return cast("Item | Outcome | None", done.mine) if done.committed else None
