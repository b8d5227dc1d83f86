"""What the queue page shows of a queue split by tenant: how many tenants, and the largest."""

from __future__ import annotations

from typing import Any

from django_fdbqueue import service

#: Tenants the queue page lists, largest first.
TENANT_ROWS = 10


def tenant_rows(database: Any, info: Any) -> dict[str, Any] | None:
    """The tenant count and the ``TENANT_ROWS`` largest tenants by ready items; None for a queue
    not split by tenant (then nothing more is read)."""
    if info.tenants is None:
        return None
    return {"count": info.tenants, "largest": service.tenant_sizes(database, info.name, top=TENANT_ROWS)}
