"""Give back what a pop or claim took for a caller that went away before it could receive it.

An async pop or claim whose caller is cancelled while its transaction runs still commits (see
``offload``). Then:

* a claim's lease is released at once, and the claim it counted in the item's attempts is
  taken back, so the item is as it was: ready, at its place, with its attempts;
* a popped item is written back under its own key (its id is unique, so its old place in queue
  order) with its payload and what it carried (codec, attempts, dedup, limit key, tenant).

To put an item back exactly, the pop keeps the raw key and value it took (``kept``). Both undos
are safe to run twice (a retry after a commit in doubt): the claim's finds its lease gone, the
pop's finds the settled marker it wrote.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from django_fdbqueue.exceptions import LeaseNotFound, QueueNotFound
from django_fdbqueue.fdbapi import transactional

from . import keylimits, leases, recovery, settled, tokens, visibility
from .catalog import require
from .kept import Taken
from ..records import Lease

_GIVEN_BACK = b"given-back"
logger = logging.getLogger("django_fdbqueue.service")


def put_back(db: Any, name: str, what: Taken) -> None:
    """Write a popped item back at its place, once (a marker makes a retry a no-op)."""
    if not what.elements:
        logger.error(
            "Item %s of queue %r was popped for a caller that went away, and its stored "
            "form was not kept: it cannot be put back.",
            what.item.id,
            name,
        )
        return
    _put_back(db, name, what)


@transactional
def _put_back(tr: Any, name: str, what: Taken) -> None:
    token = (b"put-back", what.token)
    try:
        _entry, qk = require(tr, name)
    except QueueNotFound:
        return  # the queue went, and its items with it
    if qk.queue_id != what.queue_id or settled.recorded(tr, qk, token) is not None:
        return  # another queue of that name now, or this put-back already committed
    recovery.put_back(tr, qk, what.elements, what.payload)
    recovery.returned(tr, qk, 1)
    settled.mark(tr, qk, token, _GIVEN_BACK)


def unclaim(db: Any, lease: Lease) -> None:
    """Release a lease nobody received; take back the attempt its claim counted, and its token.

    Even once the lease's time is up: nobody saw the item, so the claim must not count against
    its ``max_attempts``. Only a lease already moved on (back in the queue, claimed again, or
    acked, by an earlier run of this undo) is left as it is.
    """
    try:
        _unclaim(db, leases.parse(lease.receipt, None))
    except (LeaseNotFound, QueueNotFound):
        return  # already given back, or moved on with its attempt counted


@transactional
def _unclaim(tr: Any, r: tokens.Receipt) -> None:
    held = leases.held_lease(tr, r, expired_ok=True)
    hidden, qk = held.hidden, held.qk
    payload = tr[hidden.key(qk)]
    if not payload.present():
        return
    visibility.unhide(tr, qk, hidden)
    keylimits.give_back(tr, qk, held.entry, hidden.meta)
    keylimits.refund(tr, qk, held.entry, hidden.meta, held.now_us)
    meta = dataclasses.replace(hidden.meta, attempts=max(0, hidden.meta.attempts - 1))
    before = visibility.Hidden(hidden.visible_us, hidden.priority, hidden.stamp, b"", meta)
    visibility.ready_again(tr, qk, before, bytes(payload))
    visibility.wake(tr, qk)
