"""Settled markers: a call retried after a commit in doubt answers as its first attempt did.

Some operations remove what they act on: an ack or a release removes the lease, a requeue or a
delete the dead letter. When such a call's commit ends in doubt (``fdbapi.commit_in_doubt``:
1021, which :func:`run` retries, or 1031, which reaches the caller, who retries), the next
attempt finds nothing to act on, and "not found" would be a lie if the first attempt applied.
So each of them writes, in its own transaction, a marker ``s/epoch/token -> outcome``, and a call
that owns its transaction and finds nothing to act on looks for its token's marker before it
raises: found, it answers with the outcome recorded there.

So within the markers' lifetime (grouped by the hour, kept one to two hours: one settle in
:data:`EXPIRE_EVERY` clears older hours with a blind range clear, no reads) repeating such a call
answers as the first did; later it is refused as not found. Given a caller's transaction, an
operation joins it and never consults markers: the caller commits, and decides what an ack
already done means for the rest of its transaction.
"""

from __future__ import annotations

import random
from typing import Any, Callable, TypeVar

from django_fdbqueue.fdbapi import bounded, is_transaction, transactional

from . import keys
from ..records import now_micros

T = TypeVar("T")

EPOCH_SECONDS = 3600
#: Clearing markers of old epochs is a blind range clear; doing it on one settle in this many
#: keeps them bounded without adding a write to every ack.
EXPIRE_EVERY = 32
#: The last element of the key that holds a marker's payload, when it has one.
_PAYLOAD = "p"


def _epoch(micros: int) -> int:
    return micros // (EPOCH_SECONDS * 1_000_000)


def mark(
    tr: Any,
    qk: keys.QueueKeys,
    token: tuple[Any, ...],
    outcome: bytes,
    *,
    now_us: int | None = None,
    payload: bytes | None = None,
) -> None:
    """Record that the call named ``token`` settled with ``outcome`` (and ``payload``, if any)."""
    now_us = now_micros() if now_us is None else now_us
    key = qk.settled.pack((_epoch(now_us), *token))
    tr[key] = outcome
    if payload is not None:  # a value of its own: an item's payload may use a whole value's limit
        tr[qk.settled.pack((_epoch(now_us), *token, _PAYLOAD))] = payload
    if random.randrange(EXPIRE_EVERY) == 0:
        tr.clear_range(qk.settled.range().start, qk.settled.pack((_epoch(now_us) - 1,)))


def recorded(
    tr: Any, qk: keys.QueueKeys, token: tuple[Any, ...], payload: bool = False
) -> tuple[bytes, bytes | None] | None:
    """The outcome (and payload) a call named ``token`` recorded, if it settled within the lifetime.

    The hour before, this one and the next: a writer whose clock was a little ahead still counts.
    """
    now = _epoch(now_micros())
    epochs = (now - 1, now, now + 1)
    outcomes = [tr[qk.settled.pack((epoch, *token))] for epoch in epochs]
    payloads = [tr[qk.settled.pack((epoch, *token, _PAYLOAD))] if payload else None for epoch in epochs]
    for outcome, stored in zip(reversed(outcomes), reversed(payloads)):
        if outcome.present():
            return bytes(outcome), (bytes(stored) if stored is not None and stored.present() else None)
    return None


@bounded
def run(db_or_tr: Any, attempt: Callable[[Any, bool], T]) -> T:
    """``attempt(tr, owned)`` in a transaction, retried like ``transactional``; its result.

    ``owned`` says whether this call commits the transaction, so whether ``attempt`` may answer
    from a marker. Given a caller's transaction, it joins it (the caller commits).
    """
    if is_transaction(db_or_tr):
        return attempt(db_or_tr, False)
    return _owned(db_or_tr, attempt)


# Given the database: ``transactional``'s retry loop, which also starts from this thread's last
# commit where the database allows it (a read version round trip fewer). That is sound here
# because a settling call reads with ordinary reads only (the lease's or the dead letter's entry,
# the settled markers): whatever changed them since that version is a conflict at commit, and
# whatever it raises there (not found, expired) is looked at again from a fresh read version
# (see ``fdbapi.retrying``). An outcome it answers stands: a marker, once written, stays for the
# markers' lifetime.
@transactional(trusts=lambda _outcome: True)
def _owned(tr: Any, attempt: Callable[[Any, bool], T]) -> T:
    return attempt(tr, True)
