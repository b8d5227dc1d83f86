"""The queue service: named FIFO queues and double-ended priority queues, as a FoundationDB layer.

This is the Python API that the faces (REST API, admin, command line, workers, Tasks backend)
and applications call. Every function takes a database *or* an open transaction first: given a
database it runs in its own transaction, retried on conflicts; given a transaction it joins it
and leaves the commit to the caller. No function here opens a connection.

This module only re-exports; each operation lives in a module named for its job (``queues``,
``pushing``, ``popping``, ``consuming``, ``inspecting``, ``deadletters``, ``tenants``, and the
async twins in ``asynchronous``), as the code map lists (docs/explanation/code-map.md). Joining
a transaction is shown in docs/explanation/guarantees.md, the keys are explained in
docs/explanation/data-model.md, and every public function is in docs/reference/python-api.md.
"""

from __future__ import annotations

from .asynchronous import (
    aack,
    aclaim,
    adead_letters,
    adelete_dead_letter,
    aextend,
    aget_queue,
    apeek,
    apeek_max,
    apeek_min,
    apop,
    apush,
    apush_many,
    arelease,
    arequeue_dead_letter,
    asize,
)
from .consuming import ClaimMode, ack, claim, extend, receipt_queue, release
from .deadletters import dead_letters, delete_dead_letter, get_dead_letter, requeue_dead_letter
from ._internals.dedup import DEDUP_WINDOW_SECONDS
from .inspecting import browse, get_item, scheduled
from ._internals.items import MAX_PUSHES_PER_TRANSACTION, MAX_VALUE_BYTES
from ._internals.keylimits import KEY_MAX_BYTES, KeyLimitState
from ._internals.tenantkeys import TENANT_MAX_BYTES
from .tenants import tenant_sizes
from ._internals.leases import DEFAULT_LEASE_SECONDS, MAX_LEASE_SECONDS
from .popping import (
    HIGH_CONTENTION,
    MAX_POP_MANY,
    PLAIN,
    POP_MODES,
    PopMode,
    dequeue,
    peek,
    peek_max,
    peek_min,
    pop,
    pop_many,
    pop_max,
    pop_min,
)
from .pushing import Codec, enqueue, push, push_many
from .queues import (
    MAX_ATTEMPTS_LIMIT,
    clear,
    create_queue,
    delete_queue,
    empty,
    get_queue,
    key_limit_state,
    list_queues,
    queue_exists,
    set_key_limits,
    set_max_attempts,
    size,
)
from ._internals.spread import MAX_SPREAD
from .records import LIMIT_MAX, DeadLetter, Item, Lease, Page, PendingItem, QueueInfo, ScheduledItem, SteppedLease
from ._internals.visibility import MAX_DELAY_SECONDS
from ._internals.waiting import MAX_WAIT_SECONDS

# Also importable from here, as before, though not part of the documented surface:
# PLAIN, HIGH_CONTENTION, PopMode, MAX_POP_MANY, MAX_PUSHES_PER_TRANSACTION, Codec.

__all__ = [
    "TENANT_MAX_BYTES",
    "tenant_sizes",
    "Item",
    "PendingItem",
    "QueueInfo",
    "Page",
    "Lease",
    "ClaimMode",
    "SteppedLease",
    "ScheduledItem",
    "DeadLetter",
    "LIMIT_MAX",
    "MAX_VALUE_BYTES",
    "MAX_WAIT_SECONDS",
    "MAX_SPREAD",
    "MAX_DELAY_SECONDS",
    "MAX_LEASE_SECONDS",
    "MAX_ATTEMPTS_LIMIT",
    "DEFAULT_LEASE_SECONDS",
    "DEDUP_WINDOW_SECONDS",
    "POP_MODES",
    "create_queue",
    "set_max_attempts",
    "set_key_limits",
    "key_limit_state",
    "KeyLimitState",
    "KEY_MAX_BYTES",
    "get_queue",
    "queue_exists",
    "delete_queue",
    "list_queues",
    "enqueue",
    "dequeue",
    "push",
    "pop",
    "pop_min",
    "pop_max",
    "peek",
    "peek_min",
    "peek_max",
    "size",
    "empty",
    "clear",
    "push_many",
    "pop_many",
    "browse",
    "get_item",
    "claim",
    "ack",
    "release",
    "extend",
    "receipt_queue",
    "scheduled",
    "dead_letters",
    "get_dead_letter",
    "requeue_dead_letter",
    "delete_dead_letter",
    "apush",
    "apush_many",
    "apop",
    "apeek",
    "apeek_min",
    "apeek_max",
    "aclaim",
    "aack",
    "arelease",
    "aextend",
    "asize",
    "aget_queue",
    "adead_letters",
    "arequeue_dead_letter",
    "adelete_dead_letter",
]
