"""What high-contention pops and high-contention claims share: a desk, a staged caller, its turns.

Both serve callers in fulfil rounds (``rounds.py``). Each kind keeps its own **desk** under the
queue's ``"r"`` subspace: requests per end (keyed by the versionstamp of the commit that
registered them), results (keyed by their owner's deadline and token), and a ``lead`` key per
end. Pops use ``r`` itself (the layout ``keys.py`` lists); claims use ``r / "c"``, so that a
claim's request is never served an item to pop, nor a pop's a lease.

A **staged** caller is known by a random token and a deadline chosen before it writes anything.
This module has its identity (:class:`Staged`), registering its request and watching its two
bells (:func:`register`, :func:`watch_bells`), finding its request after a commit in doubt
(:func:`find_request`), and the loop of turns after it registered (:func:`take_turns`): run a
round when it leads, else wait for a bell, then look. The protocol is explained in
docs/explanation/high-contention-pop.md (pops) and docs/explanation/high-contention-claims.md.
"""

from __future__ import annotations

import functools
import os
import random
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, cast

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import ErrorCode, FDBError, count_retry, fdb, make_error, tuples

from . import keys, runtime
from .catalog import Entry, first
from ..records import now_micros
from .recovery import RESULT_BELL, RESULT_LEAD_BELL, micros
from .waiting import AnyOf

TOKEN_BYTES = 16
#: The claims' desk, under the pops' staging subspace (whose own ends are "min" and "max").
CLAIMS = "c"
#: Bounds of one wait for a bell before looking again (jittered, so waiters spread).
WAIT_SECONDS = (0.05, 0.15)
#: How long the caller a round names in the ``lead`` key has to run its own round before any
#: waiting caller may run one instead (it may have died): a few commits' time.
LEAD_SECONDS = 0.5

_Versionstamp = fdb.tuple.Versionstamp


class Outcome:
    """Sentinels for what a step decided (distinct from an Item, a Lease and None)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


STAGED = Outcome("staged")  # a request is registered: wait for a round to serve it
LEAD = Outcome("lead")  # this caller runs the next fulfil round (appointed, or nobody else does)
EMPTY = Outcome("empty")  # the caller was answered "the queue is empty"
GONE = Outcome("gone")  # neither request nor result: dropped after the deadline, or withdrawn


@dataclass(frozen=True)
class Desk:
    """One kind's requests, results and lead keys, under ``space``."""

    space: fdb.Subspace

    @cached_property
    def _ends(self) -> dict[str, fdb.Subspace]:
        return {end: self.space[end] for end in keys.ENDS}

    def requests(self, end: str) -> fdb.Subspace:
        """Requests waiting for ``end``, in the order their registrations committed."""
        return self._ends[end]

    @cached_property
    def results(self) -> fdb.Subspace:
        return self.space[keys.RESULTS]

    def lead(self, end: str) -> bytes:
        """Who runs the fulfil rounds of ``end`` now, and until when."""
        return self.space.pack((keys.LEAD, end))


@functools.lru_cache(maxsize=4096)
def pop_desk(qk: keys.QueueKeys) -> Desk:
    """The pops' desk: the same keys as ``qk.requests``, ``qk.results`` and ``qk.lead``."""
    return Desk(qk.staging)


@functools.lru_cache(maxsize=4096)
def claim_desk(qk: keys.QueueKeys) -> Desk:
    return Desk(qk.staging[CLAIMS])


@dataclass
class Staged:
    """A caller that may stage a request: its identity, its request, its bells and its turn."""

    name: str
    end: str
    deadline_us: int
    deadline: float  # the same deadline on this process's monotonic clock
    token: bytes = field(default_factory=lambda: os.urandom(TOKEN_BYTES))
    qk: keys.QueueKeys | None = None
    entry: Entry | None = None
    request_key: bytes | None = None
    #: This caller runs the next fulfil round.
    leads: bool = False
    #: The watch on :attr:`bell` (or on both bells), set by the registration's own transaction.
    watch: Any = None
    #: The watch on :attr:`lead_bell`, when the registration set one.
    lead_watch: Any = None

    def bind(self, tr: Any) -> keys.QueueKeys:
        """Read the catalog entry (``entry``, ``qk``), refusing queues this kind cannot serve."""
        raise NotImplementedError

    def desk_of(self, qk: keys.QueueKeys) -> Desk:
        return pop_desk(qk)

    @property
    def desk(self) -> Desk:
        assert self.qk is not None
        return self.desk_of(self.qk)

    def request_value(self) -> bytes:
        """What the request carries for the round that serves it."""
        return tuples.pack((self.deadline_us,))

    @property
    def results(self) -> slice:
        return self.desk.results.range((self.deadline_us, self.token))

    @property
    def bell(self) -> bytes:
        """The key a round writes when it answers this caller."""
        return self.desk.results.pack((self.deadline_us, self.token, RESULT_BELL))

    @property
    def lead_bell(self) -> bytes:
        """The key a round writes when it hands this caller the next round."""
        return self.desk.results.pack((self.deadline_us, self.token, RESULT_LEAD_BELL))

    def named(self, raw: Any) -> bool:
        """Does the ``lead`` key's value name this caller?"""
        return cast(bool, raw.present() and tuples.unpack(bytes(raw))[0] == self.token)

    def may_lead(self, raw: Any, now_us: int) -> bool:
        """Given the ``lead`` key's value: is nobody else running the rounds (or are we named)?"""
        if not raw.present():
            return True
        token, until_us = tuples.unpack(bytes(raw))
        return cast(bool, token == self.token or until_us < now_us)

    def doubt(self, got: Any) -> None:
        """An attempt that would have given us ``got`` ended in 1021 (pops keep candidates)."""

    def left(self) -> float:
        return self.deadline - time.monotonic()


def check_timeout(timeout: object, default: float) -> float:
    """A staged call's ``timeout``: seconds above 0 and at most 3600 (None: ``default``)."""
    if timeout is None:
        return default
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise InvalidArgument("timeout must be a number of seconds above 0 and at most 3600.")
    return float(timeout)


def answer(got: Any) -> Any:
    """What a staged call returns for the outcome ``got``: nothing when EMPTY (or None), 1031 when
    GONE (its request dropped after the deadline, or withdrawn), else what it got."""
    if got is GONE:
        raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)
    return None if got is EMPTY else got


def retry(tr: Any, error: Exception) -> None:
    """Count the error as ``transactional`` does, then back off (or re-raise) as ``on_error`` decides."""
    count_retry(error.code)  # type: ignore[attr-defined]
    tr.on_error(error).wait()


def register(tr: Any, s: Staged, lead: Any) -> tuple[Any, bool]:
    """Write our request, keyed by this commit's versionstamp, and watch our bells.

    ``lead`` is the ``lead`` key's value, read as a snapshot: when nobody leads, the registration
    names itself there, with a read conflict on it, so that of several registering at once one
    leads and the others register again behind it. Returns the versionstamp's future and whether
    we named ourselves.
    """
    desk = s.desk
    tr.set_versionstamped_key(
        desk.requests(s.end).pack_with_versionstamp((_Versionstamp(), s.token)), s.request_value()
    )
    watch_bells(tr, s)
    now_us = now_micros()
    leads = s.may_lead(lead, now_us)
    if leads:
        tr.add_read_conflict_key(desk.lead(s.end))
        tr[desk.lead(s.end)] = tuples.pack((s.token, now_us + micros(LEAD_SECONDS)))
    return tr.get_versionstamp(), leads


def registered(s: Staged, stamp: Any, leads: bool) -> None:
    """The registration committed: remember the request's key and whether we lead."""
    s.request_key = s.desk.requests(s.end).pack((_Versionstamp(bytes(stamp.wait()), 0), s.token))
    s.leads = leads


def find_request(tr: Any, s: Staged) -> bool:
    """After a 1021: did our registration commit? A request or a result with our token says so.

    Snapshot reads: the unknown attempt can no longer commit once 1021 is reported, so there is
    nothing to conflict with, and an ordinary read of the whole request range would conflict
    with every registration that reserves its versionstamp there.
    """
    if first(tr.snapshot.get_range(s.results.start, s.results.stop, limit=1)) is not None:
        s.request_key = None  # already served: settling will collect it
        return True
    requests = s.desk.requests(s.end)
    r = requests.range()
    for kv in tr.snapshot.get_range(r.start, r.stop):
        if requests.unpack(bytes(kv.key))[1] == s.token:
            s.request_key = bytes(kv.key)
            return True
    return False


def watch_bells(tr: Any, s: Staged) -> Any:
    """Watch both of our bells (answered; leads next), as one future (``s.watch``)."""
    let_go(s)  # the watches of an earlier look, if any
    s.lead_watch = tr.watch(s.lead_bell)
    s.watch = AnyOf(tr.watch(s.bell), s.lead_watch)
    return s.watch


def let_go(s: Staged) -> None:
    """Cancel the bells' watches still waiting: each counts against the database's limit, and an
    engine that keeps them (the embedded one) would keep them until the bell rings, maybe never."""
    if s.watch is not None:
        s.watch.cancel()
    s.watch = s.lead_watch = None


def rang(watch: Any) -> bool:
    """Did this watch fire because its key changed (not because it failed, or never)?"""
    if watch is None or not watch.is_ready():
        return False
    try:
        watch.wait()
    except FDBError:
        return False
    return True


def take_turns(s: Staged, lead_round: Callable[[], Any], look: Callable[[bool], Any]) -> Any:
    """A registered caller's turns until it has its answer (what ``lead_round`` or ``look`` gave).

    It runs a round when it leads (``lead_round()``: an answer, or None to look), else waits for
    a bell (a *run the next round* bell makes it lead at once) or a short jittered timeout, then
    looks (``look(withdraw)``: an answer; :data:`LEAD`; or its watch, set again: wait more).
    Past its deadline the look withdraws.
    """
    while True:
        if s.leads:
            s.leads = False
            answer = lead_round()
            if answer is not None:
                return answer
        elif s.watch is not None:
            runtime.wait_on(s.watch, min(random.uniform(*WAIT_SECONDS), s.left()))
            named = rang(s.lead_watch)
            let_go(s)
            if named and s.left() > 0:
                s.leads = True  # handed the next round: run it, no need to look first
                continue
        state = look(s.left() <= 0)
        if state is LEAD:
            s.leads = True
        elif state is not s.watch:
            return state
