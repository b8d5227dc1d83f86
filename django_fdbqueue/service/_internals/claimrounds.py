"""High-contention claims as rounds see them: a claimer's identity and request, and what serving it writes.

A claim's request waits on the claims' desk (``staging.claim_desk``: ``r / "c"``) and carries its
owner's deadline and lease length. A round serves it with exactly the writes a claim makes
(``leases.grant``: the item hidden under a new lease, its attempt counted, the counters and
tallies), then writes the owner's result: the lease, keyed by the hidden item's own key elements,
with a copy of the payload, so that the owner reads its whole Lease in one range read::

    r / "c" / "res" / deadline_us / token / 1 / visible_at_us / priority / vs / lease_token / meta...
                                                   -> payload     the lease a round granted
    r / "c" / "res" / deadline_us / token / 0      -> b""         "the queue was empty"

(the bells, requests and lead keys are the pops' own layout on this desk). A result is not an
item: its item is safe in the leased items whatever happens to its owner, and comes back when the
lease ends. So what a round clears up after owners that died is only their results, blindly
(:meth:`ClaimRounds.recover`). ``hcclaims.py`` has the protocol.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from django_fdbqueue.exceptions import InvalidArgument, QueueNotFound
from django_fdbqueue.fdbapi import tuples

from . import keylimits, keys, leases, visibility
from .catalog import Entry, require
from ..records import Lease
from .recovery import RESULT_BELL, RESULT_EMPTY, RESULT_ITEM
from .rounds import ROUND_BYTES, Kind, Live, Round
from .staging import EMPTY, Desk, Outcome, Staged, claim_desk


@dataclass
class Claim(Staged):
    """One high-contention claim: a staged caller (``staging.Staged``) that asks for a lease."""

    #: How long the lease lasts from the round that grants it (microseconds).
    lease_us: int = 0
    #: Run in the transaction that collects the lease (see ``hcclaims``).
    step: Callable[[Any, Lease], Any] | None = None
    #: A fast-path claim whose commit was in doubt: its lease, if it committed.
    candidate: Lease | None = None
    #: A collect (with ``step``) whose commit was in doubt: what it returned, if it committed.
    collected: Lease | None = None
    #: The receipt of a lease to ack in the claim's first commit (see ``hcclaims``).
    ack: str | None = None

    def desk_of(self, qk: keys.QueueKeys) -> Desk:
        return claim_desk(qk)

    def request_value(self) -> bytes:
        return tuples.pack((self.deadline_us, self.lease_us))

    def bind(self, tr: Any) -> keys.QueueKeys:
        entry, qk = require(tr, self.name, fifo_ok=self.end == "min")
        return self.check(entry, qk)

    def check(self, entry: Entry, qk: keys.QueueKeys) -> keys.QueueKeys:
        """Keep the entry, or refuse a queue whose claims rounds cannot serve (see ``refusal``)."""
        refused = refusal(entry)
        if refused is not None:
            raise InvalidArgument(refused, name=self.name, mode="high-contention")
        self.entry = entry
        if self.qk is None:
            self.qk = qk
        elif self.qk.queue_id != entry.queue_id:
            raise QueueNotFound(f"The queue {self.name!r} was deleted while a claim waited.", name=self.name)
        return qk


def refusal(entry: Entry) -> str | None:
    """Why a high-contention claim refuses this queue, or None.

    A round hands out items in queue order; a queue with per-key limits skips items whose key is
    at its limit, and a queue split by tenant takes tenants in turn: neither order is a round's.
    """
    if entry.tenants:
        return (
            f"The queue {entry.name!r} is split by tenant, and a high-contention claim does not take "
            "turns between tenants: claim it with mode='plain'."
        )
    if keylimits.of(entry) is not None:
        return (
            f"The queue {entry.name!r} has per-key limits, and a high-contention claim does not skip "
            "items whose key is at its limit: claim it with mode='plain' (or spread=)."
        )
    return None


def answer_key(desk: Desk, request: Live, hidden: visibility.Hidden) -> bytes:
    """The result that tells ``request``'s owner its lease: the hidden item's key elements."""
    elements = (hidden.visible_us, hidden.priority, hidden.stamp, hidden.token, *hidden.meta.elements())
    return desk.results.pack((request.deadline_us, request.token, RESULT_ITEM, *elements))


def answer_of(name: str, qk: keys.QueueKeys, desk: Desk, kv: Any) -> Lease | Outcome:
    """What a result row tells its owner: its Lease, or EMPTY."""
    parts = desk.results.unpack(bytes(kv.key))
    if parts[2] != RESULT_ITEM:
        return EMPTY
    visible_us, priority, stamp, token, *rest = parts[3:]
    hidden = visibility.Hidden(visible_us, priority, stamp, token, keys.ItemMeta.from_elements(rest))
    return leases.leased(name, qk, hidden, kv.value)


def is_answer(desk: Desk, kv: Any) -> bool:
    """A result row that answers (a lease, or "empty"), not a bell."""
    return desk.results.unpack(bytes(kv.key))[2] in (RESULT_ITEM, RESULT_EMPTY)


class ClaimRounds(Kind):
    """Rounds on the claims' desk: each request served gets a lease, written as its owner's result."""

    direct = False  # the leader's lease is written as a result too: the record of a round in doubt
    round_bytes = ROUND_BYTES // 2  # each payload is written twice: the leased item and the result

    def desk(self, qk: keys.QueueKeys) -> Desk:
        return claim_desk(qk)

    def serve(
        self, tr: Any, entry: Entry, qk: keys.QueueKeys, pairs: list[tuple[Live, Any]], p: Any, done: Round, now_us: int
    ) -> None:
        """Lease each item to its request's owner, for the lease length the request carries."""
        desk = claim_desk(qk)
        for request, kv in pairs:
            tr.add_read_conflict_key(bytes(kv.key))
            assert request.key is not None  # a claim's fast path takes its item without a request
            tr.add_read_conflict_key(request.key)
            del tr[request.key]
            (lease_us,) = request.extra
            token = os.urandom(keys.LEASE_TOKEN_BYTES)
            hidden = leases.grant(tr, qk, kv, now_us, now_us + lease_us, token)
            tr[answer_key(desk, request, hidden)] = bytes(kv.value)
            if p is not None and request.token == p.token:
                done.mine = leases.leased(entry.name, qk, hidden, kv.value)
            else:
                tr[desk.results.pack((request.deadline_us, request.token, RESULT_BELL))] = b""
            done.served += 1

    def recover(self, tr: Any, qk: keys.QueueKeys, cutoff_us: int) -> tuple[int, bool]:
        """Results whose owner's deadline passed before ``cutoff_us`` go, blindly: their leases
        end by themselves. A range clear with no read, so it conflicts with nothing."""
        results = claim_desk(qk).results
        tr.clear_range(results.range().start, results.pack((cutoff_us,)))
        return 0, False

    def tidy(self, tr: Any, qk: keys.QueueKeys, now_us: int) -> None:
        """Nothing: claims write no receipts of their own (a lease's token is its receipt)."""


CLAIM_ROUNDS = ClaimRounds()
