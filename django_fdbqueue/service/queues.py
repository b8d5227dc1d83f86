"""Public operations on whole queues: create, look up, list, delete, count and clear them.

Each checks its arguments and hands over to ``catalog`` (the named queues) or ``items`` (what a
queue holds); see ``keys`` for where both live.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import DatabaseOrTransaction

from ._internals import catalog, checks, keylimits, reading, tokens
from .observe import observed
from .records import LIMIT_MAX, Page, QueueInfo

#: Most claims without an ack ``max_attempts`` may allow before an item becomes a dead letter.
MAX_ATTEMPTS_LIMIT = 1000


def _check_max_attempts(max_attempts: object) -> int | None:
    if max_attempts is None:
        return None
    return checks.check_count(max_attempts, "max_attempts", minimum=1, maximum=MAX_ATTEMPTS_LIMIT)


@observed
def create_queue(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    kind: str = "fifo",
    *,
    max_attempts: int | None = None,
    key_concurrency: int | None = None,
    key_rate: float | None = None,
    tenants: bool = False,
) -> QueueInfo:
    """Create an empty queue; an existing name raises QueueAlreadyExists (never an overwrite).

    ``max_attempts`` (1 to 1000, or None for no limit): claims an item may have without an
    ack before it moves to the dead letters. ``key_concurrency`` and ``key_rate``: per-key
    limits (see ``set_key_limits``). ``tenants=True`` splits the queue by tenant: every push
    names its ``tenant``, and pops and claims take from the tenants in turn (``tenantturns``).
    """
    checks.check_name(name)
    checks.check_kind(kind)
    if not isinstance(tenants, bool):
        raise InvalidArgument("tenants must be true or false.", field="tenants")
    keylimits.check_not_split(tenants, key_concurrency, key_rate)
    return catalog.create_queue(
        db_or_tr,
        name,
        kind,
        _check_max_attempts(max_attempts),
        keylimits.check_concurrency(key_concurrency),
        keylimits.check_rate(key_rate),
        tenants,
    )


_UNCHANGED: Any = object()


@observed
def set_key_limits(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    *,
    concurrency: int | None = _UNCHANGED,
    rate: float | None = _UNCHANGED,
) -> QueueInfo:
    """Change the queue's per-key limits; an argument left out stays as it is, None removes it.

    ``concurrency``: at most this many items of one key leased at once (1 to 1,000,000).
    ``rate``: at most this many claims per second per key (above 0), a token bucket holding
    ``max(1, rate)`` tokens. Items pushed with ``key=`` are limited; items without are not.
    Leases held now keep counting; the keys' markers and buckets start afresh. A queue split
    by tenant takes no limits (InvalidArgument, as ``create_queue``): None is all it accepts.
    """
    checks.check_name(name)
    changes: dict[str, Any] = {}
    if concurrency is not _UNCHANGED:
        changes["key_concurrency"] = keylimits.check_concurrency(concurrency)
    if rate is not _UNCHANGED:
        changes["key_rate"] = keylimits.check_rate(rate)
    return keylimits.update(db_or_tr, name, changes)


@observed
def key_limit_state(db_or_tr: DatabaseOrTransaction, name: str, *, top: int = 20) -> keylimits.KeyLimitState:
    """The queue's per-key limits and where its keys stand: the ``top`` keys by leases held, and
    those at their concurrency limit (snapshot reads: never conflicts)."""
    checks.check_name(name)
    top = checks.check_count(top, "top", minimum=1, maximum=LIMIT_MAX)
    return keylimits.state(db_or_tr, name, top)


@observed
def set_max_attempts(db_or_tr: DatabaseOrTransaction, name: str, max_attempts: int | None) -> QueueInfo:
    """Change the queue's ``max_attempts`` (None: no limit); applies to leases ending from now on."""
    checks.check_name(name)
    return catalog.set_max_attempts(db_or_tr, name, _check_max_attempts(max_attempts))


@observed
def get_queue(db_or_tr: DatabaseOrTransaction, name: str) -> QueueInfo:
    """The queue's kind and statistics (constant time); QueueNotFound if there is none."""
    checks.check_name(name)
    return catalog.get_queue(db_or_tr, name)


@observed
def queue_exists(db_or_tr: DatabaseOrTransaction, name: str) -> bool:
    checks.check_name(name)
    return catalog.queue_exists(db_or_tr, name)


@observed
def delete_queue(db_or_tr: DatabaseOrTransaction, name: str) -> None:
    """Delete the queue and all its items in one transaction."""
    checks.check_name(name)
    catalog.delete_queue(db_or_tr, name)


@observed
def list_queues(
    db_or_tr: DatabaseOrTransaction, *, prefix: str = "", cursor: str | None = None, limit: int = 50
) -> Page[QueueInfo]:
    """Queues ordered by name (byte order), ``limit`` per page, optionally those starting with ``prefix``."""
    checks.check_prefix(prefix)
    limit = checks.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = tokens.parse_list_cursor(cursor) if cursor is not None else None
    return catalog.list_queues(db_or_tr, prefix, after, limit)


@observed
def size(db_or_tr: DatabaseOrTransaction, name: str) -> int:
    """Number of items (an atomic counter: one read)."""
    checks.check_name(name)
    return reading.size(db_or_tr, name)


@observed
def empty(db_or_tr: DatabaseOrTransaction, name: str) -> bool:
    checks.check_name(name)
    return reading.empty(db_or_tr, name)


@observed
def clear(db_or_tr: DatabaseOrTransaction, name: str) -> None:
    """Remove every item (the queue itself stays)."""
    checks.check_name(name)
    reading.clear(db_or_tr, name)
