"""What the app's other packages build on, below the operations: a small, documented surface.

Schedules, the Tasks backend, the REST API, the worker and the simulation need a few things the
public operations do not offer: the root subspace their own keys live under, the service's own
argument checks (so a face refuses bad input in the same words), the queue list's cursor, a
claim's receipt read back, the round that serves high-contention pops nobody is waiting on, and
the seam where the service meets time, threads and chance. They import them from here, never
from ``service._internals``, whose modules stay free to change (``tests/test_architecture.py``
checks the names imported).
"""

from __future__ import annotations

from ._internals import runtime
from ._internals.catalog import forget_entries as forget_cached_queues
from ._internals.catalog import root
from ._internals.contention import fulfil as serve_high_contention
from ._internals.keylimits import check_key
from ._internals.checks import check_name, check_priority, check_seconds
from ._internals.tokens import Receipt, list_cursor, parse_receipt
from ._internals.spread import check as check_spread
from .consuming import check_claim_mode

__all__ = [
    "Receipt",
    "check_key",
    "check_name",
    "check_priority",
    "check_seconds",
    "check_spread",
    "check_claim_mode",
    "forget_cached_queues",
    "list_cursor",
    "parse_receipt",
    "root",
    "runtime",
    "serve_high_contention",
]
