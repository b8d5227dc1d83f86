"""A workflow's header: read, written with its listing and retention entries, finished, forgotten.

The header is written only when the workflow's status changes (launched, finished, failed,
cancelled) and once more when a stopped workflow's members are all marked. Every member's finish
reads it with an ordinary read, so a status change and a member's release are serialized: a
member that committed first released its successors before the change; one that commits after
sees the new status and releases nothing. Members' finishes never write it, so they never
conflict on it with one another.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service.records import now_micros

from ..backend import FDBQueueBackend
from ..compat import task_backends
from . import keys
from .keys import Header

#: Workflows past their retention forgotten by each one that finishes.
PRUNE_BATCH = 4


def read(tr: Any, workflow_id: str) -> Header | None:
    raw = tr[keys.Keys(workflow_id).header]
    return Header.loads(bytes(raw)) if raw.present() else None


@transactional
def get(tr: Any, workflow_id: str) -> Header | None:
    return read(tr, workflow_id)


def write(tr: Any, header: Header, previous: Header | None) -> None:
    """Store ``header``, moving its listing (and retention) entry from where ``previous`` had it."""
    if previous is not None:
        del tr[keys.listing_key(previous)]
        if previous.expires_us is not None:
            del tr[keys.expiry_key(previous.expires_us, previous.id)]
    tr[keys.Keys(header.id).header] = header.dumps()
    tr[keys.listing_key(header)] = b""
    if header.expires_us is not None:
        tr[keys.expiry_key(header.expires_us, header.id)] = b""


def backend_of(alias: str) -> FDBQueueBackend | None:
    """The FDBQueueBackend a workflow was enqueued on, or None if TASKS no longer has it."""
    try:
        backend = task_backends[alias]
    except Exception:  # noqa: BLE001 - an alias removed from TASKS, or a backend that fails to load
        return None
    return backend if isinstance(backend, FDBQueueBackend) else None


def finish(
    tr: Any, header: Header, status: str, reason: dict[str, Any] | None = None, *, swept: bool = False
) -> Header:
    """Give the workflow its final status (kept for the backend's RESULT_RETENTION, as its
    members' results are), and forget a few workflows whose retention has passed."""
    now_us = now_micros()
    backend = backend_of(header.backend)
    done = Header(**{**header.__dict__, "status": status, "finished_us": now_us, "swept": swept})
    done.expires_us = None if backend is None else backend.retention_end(now_us)
    if reason is not None:
        done.reason = reason
    write(tr, done, header)
    prune(tr, now_us)
    return done


def prune(tr: Any, now_us: int) -> int:
    """Forget up to PRUNE_BATCH finished workflows whose retention has passed: one range clear each.

    Their members' records are the task results' own: ``results.prune`` forgets them. A stopped
    workflow whose members are not all marked yet (``swept``) is kept one more retention, and
    listed, until ``cancel_workflow`` marks them.
    """
    begin, end = keys.expiry_range(now_us)
    rows = list(tr.snapshot.get_range(begin, end, limit=PRUNE_BATCH))
    found = [(bytes(kv.key), *keys.expiry_unpack(bytes(kv.key))) for kv in rows]
    headers = [(key, expires_us, tr[keys.Keys(workflow_id).header]) for key, expires_us, workflow_id in found]
    removed = 0
    for expiry_key, expires_us, raw in headers:
        tr.add_read_conflict_key(expiry_key)
        del tr[expiry_key]
        if not raw.present():
            continue
        header = Header.loads(bytes(raw))
        if header.expires_us != expires_us:
            continue
        if not header.swept:  # members not marked yet (their READY records would stay forever)
            retention = expires_us - (header.finished_us or expires_us)
            write(tr, Header(**{**header.__dict__, "expires_us": now_us + max(retention, 1)}), None)
            continue
        del tr[keys.listing_key(header)]
        tr.clear_range(*keys.Keys(header.id).everything())
        removed += 1
    return removed
