"""Public reliable consumption: ``claim`` an item under a lease, then ``ack``, ``release`` or ``extend`` it.

The argument checks live here; ``leases`` keeps the leases themselves (receipts, settling, and
what a retry after ``commit_unknown_result`` finds).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Literal, cast

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import DatabaseOrTransaction, Transaction

from ._internals import checks, hcclaims, leases, tokens
from ._internals import spread as spread_claims
from ._internals.leases import DEFAULT_LEASE_SECONDS
from .observe import observed
from .records import Lease
from ._internals.visibility import MAX_DELAY_SECONDS
from ._internals.waiting import blocking
from .popping import HIGH_CONTENTION, PLAIN

#: Claim modes: one transaction (joins the caller's), or staged requests served in rounds.
CLAIM_MODES = (PLAIN, HIGH_CONTENTION)
ClaimMode = Literal["plain", "high-contention"]


@observed(none_is_empty=True)
def claim(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    *,
    lease: float = DEFAULT_LEASE_SECONDS,
    end: str = "min",
    wait: float | None = None,
    step: Callable[[Transaction, Lease], Any] | None = None,
    spread: int | None = None,
    mode: ClaimMode = "plain",
    timeout: float | None = None,
    ack: str | None = None,
) -> Lease | None:
    """Take the next visible item for ``lease`` seconds (at-least-once delivery); None if none.

    The item stays stored but hidden; ack it with the Lease's receipt when done, or it comes
    back at its place in queue order when the lease ends. ``item.attempts`` counts this claim.
    ``wait`` blocks as for ``pop`` (and then needs the database). On a queue with per-key
    limits, items whose key is at its limit are skipped (``keyclaims``).

    ``step(tr, lease)``, if given, runs in the claim's own transaction once the item is taken:
    what it writes commits with the claim or not at all, one transaction fewer than writing it
    afterwards (a task marked running, say). It runs again on each retry of the transaction;
    the claim then returns a SteppedLease, a Lease whose ``step_result`` is what the committed
    run returned. An exception it raises fails the claim, so it must not raise for an item it
    cannot handle: it should return something that says so.

    ``spread`` (2 to 100) takes one of the first ``spread`` visible items at random instead of
    the first: for many claimers of one queue, which then rarely collide, at the cost of exact
    order (see ``spread.py``; ignored on queues with per-key limits or split by tenant).

    ``mode="high-contention"`` keeps exact order for many claimers of one queue: claims that meet
    others register a request, and rounds lease items to waiting requests in order, many per
    commit (``hcclaims.py``; docs/explanation/high-contention-claims.md). It needs the database,
    gives up after ``timeout`` seconds (default 5) with ``FDBError`` 1031, and refuses ``spread``
    and queues with per-key limits or split by tenant; ``step`` runs in the transaction that
    collects the lease. ``ack`` (that mode only) is the receipt of a lease to ack in the claim's
    first commit: a claimer acks its last item and asks for the next in one commit (errors as for
    ``ack``, and then nothing is claimed; repeated, it finds the ack done).
    """
    checks.check_name(name)
    checks.check_end(end)
    seconds = leases.check_lease(lease)
    if step is not None and not callable(step):
        raise InvalidArgument(f"step must be callable as step(tr, lease), not {type(step).__name__}.", field="step")
    spreading = spread_claims.check(spread)
    if check_mode(mode, spreading, timeout) == HIGH_CONTENTION:
        return _staged(db_or_tr, name, end, seconds, wait, timeout, step, ack)
    if ack is not None:
        raise InvalidArgument(
            "ack= is for mode='high-contention'; a plain claim joins a transaction: ack and claim in yours.",
            field="ack",
        )
    once = leases.claim_once if spreading is None else leases.claim_spread_once
    return blocking(db_or_tr, name, end, wait, lambda: once(db_or_tr, name, seconds, end, step, spreading))


def _staged(
    db: Any, name: str, end: str, seconds: float, wait: object, timeout: float | None, step: Any, ack: str | None
) -> Lease | None:
    """A high-contention claim (``hcclaims``), waiting as ``wait`` says; ``ack`` goes with its first commit."""
    acking = [None if ack is None else leases.parse(ack, None).encode()]

    def once() -> Lease | None:
        got = hcclaims.claim(db, name, end, seconds, timeout=timeout, step=step, ack=acking[0])
        acking[0] = None  # acked: a wait's next attempt claims only
        return got

    return blocking(db, name, end, wait, once)


def check_claim_mode(mode: object, spread: int | None = None) -> ClaimMode:
    """``mode`` as a claim takes it beside ``spread`` (for faces that pass it on: workers, tasks)."""
    return cast(ClaimMode, check_mode(mode, spread, None))


def check_mode(mode: object, spreading: int | None, timeout: object) -> str:
    """A claim's ``mode``, checked with what it combines with (``spread``, ``timeout``)."""
    if mode not in CLAIM_MODES:
        raise InvalidArgument(f"mode must be {PLAIN!r} or {HIGH_CONTENTION!r}, not {mode!r}.", mode=str(mode))
    if mode == HIGH_CONTENTION and spreading is not None:
        raise InvalidArgument(
            "spread gives up exact order and mode='high-contention' keeps it: pass one of them, not both.",
            mode=str(mode),
        )
    if mode == PLAIN and timeout is not None:
        raise InvalidArgument(
            "timeout applies to mode='high-contention'; a plain claim is bounded by FDBQUEUE['TIMEOUT']."
        )
    return str(mode)


@observed
def ack(db_or_tr: DatabaseOrTransaction, receipt: str, *, name: str | None = None) -> None:
    """The claimed item is done: remove it for good.

    Raises LeaseExpired once the lease's time is up, LeaseNotFound when the lease is over
    (acked, released, or expired and moved on), InvalidReceipt for anything not a receipt (or,
    with ``name``, a receipt of another queue). Repeated within an hour, given a database, it
    answers as the first ack did: a retry after a commit in doubt succeeds (see the error codes'
    "Commits in doubt").
    """
    leases.ack(db_or_tr, receipt, name)


@observed
def release(db_or_tr: DatabaseOrTransaction, receipt: str, *, delay: float = 0, name: str | None = None) -> str:
    """Give the item back: visible again at once, or after ``delay`` seconds.

    Returns "ready", "delayed", or "dead" when the item had its queue's ``max_attempts`` claims
    and moved to the dead letters. Errors as for ``ack``.
    """
    seconds = checks.check_seconds(delay, "delay", minimum=0, maximum=MAX_DELAY_SECONDS)
    return leases.release(db_or_tr, receipt, seconds, name)


@observed
def extend(
    db_or_tr: DatabaseOrTransaction,
    receipt: str,
    lease: float | None = None,
    *,
    name: str | None = None,
    seconds: float | None = None,
) -> Lease:
    """Make the lease end ``lease`` seconds from now (the receipt stays the same).

    ``lease`` means what it means for ``claim``: seconds from now until the lease ends, with
    the same bounds. ``seconds=`` is its deprecated spelling, still accepted. Errors as for
    ``ack``.
    """
    return leases.extend(db_or_tr, receipt, leases.check_lease(_renamed(lease, seconds)), name)


def _renamed(lease: object, seconds: object) -> object:
    """extend's ``lease``, given under its old name ``seconds`` or its own (not both)."""
    if seconds is None:
        if lease is None:
            raise InvalidArgument("extend needs lease: the seconds from now until the lease ends.", field="lease")
        return lease
    if lease is not None:
        raise InvalidArgument("Pass lease (or its old name seconds), not both.", field="lease")
    warnings.warn("extend(seconds=...) is deprecated: pass lease=... instead.", DeprecationWarning, stacklevel=4)
    return seconds


def receipt_queue(receipt: str) -> str:
    """The name of the queue a receipt belongs to (InvalidReceipt if it is not a receipt)."""
    return tokens.parse_receipt(receipt).name
