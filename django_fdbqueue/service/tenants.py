"""Public operations of queues split by tenant (``create_queue(..., tenants=True)``).

Pushes name their tenant (``push(..., tenant=...)``); pops, claims and peeks take from the
tenants in turn (``tenantturns``); everything else works as on any queue. Here: what the
tenants hold, for the admin and the CLI.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import DatabaseOrTransaction, transactional

from ._internals import checks, tenantturns
from ._internals.catalog import require
from .observe import observed
from .records import LIMIT_MAX


@transactional
def _sizes(tr: Any, name: str, top: int) -> list[tuple[str, int]]:
    entry, qk = require(tr, name)
    if not entry.tenants:
        raise InvalidArgument(f"Queue {name!r} is not split by tenant.", field="tenants", name=name)
    return list(tenantturns.sizes(tr, qk, top).items)


@observed
def tenant_sizes(db_or_tr: DatabaseOrTransaction, name: str, *, top: int = 20) -> list[tuple[str, int]]:
    """The ``top`` tenants by ready items, largest first, as ``(tenant, ready items)`` pairs.

    Snapshot reads (never conflicts): an overview, not a count to act on. Leased and delayed
    items are not counted until they are ready again.
    """
    checks.check_name(name)
    top = checks.check_count(top, "top", minimum=1, maximum=LIMIT_MAX)
    return _sizes(db_or_tr, name, top)
