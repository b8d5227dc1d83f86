"""Stopping a workflow: cancelling it, and marking the members that will never run.

A workflow stops when it is cancelled (``cancel_workflow``) or, under ``on_failure="fail"``, when
a member fails. Stopping is one write, the header's status: from then on no finish releases a
node (each reads the header), and a member whose item was already pushed is not run when a
worker claims it (``release.stopped``, in the claim's transaction). Running members finish and
their results are recorded; they release nothing.

Then the members that will never run are marked, a page of nodes per transaction
(``sweep``): each READY record becomes FAILED with a ``WorkflowCancelled`` or ``WorkflowFailed``
error, so it is finished like any result (listed as failed, forgotten after the retention), and
its node is marked cancelled. ``cancel_workflow`` sweeps before it returns; for a member's
failure, the worker that recorded it sweeps once the failure commits. A sweep cut short (its
process died) leaves ``swept`` false on the header: ``cancel_workflow`` on the stopped workflow
finishes it, and until then readers show those members as cancelled anyway.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service.records import now_micros

from .. import limits, results
from ..compat import get_module_path
from ..exceptions import WorkflowCancelled, WorkflowDoesNotExist, WorkflowFailed
from . import headers
from .keys import (
    CANCELLED,
    DEFAULT_ALIAS,
    FAILED,
    NODE_CANCELLED,
    ONE,
    RUNNING,
    SETTLED,
    STORING,
    Header,
    Keys,
    StoredNode,
)
from .reading import WorkflowResult, get_workflow

#: Nodes looked at per sweep transaction, and bytes of records it may rewrite.
SWEEP_NODES = 200
SWEEP_BYTES = 1_000_000


def cancel_workflow(workflow_id: str, backend: str = DEFAULT_ALIAS) -> WorkflowResult:
    """Cancel a workflow: members not started never run; running ones finish and release nothing.

    Safe to call again (it finishes an interrupted sweep); a workflow already finished is left
    as it is. Raises ``WorkflowDoesNotExist`` for an id unknown to that backend.
    """
    db = get_database()
    header = _cancel(db, workflow_id, backend)
    if header.status in (FAILED, CANCELLED) and not header.swept:
        sweep(db, workflow_id)
    return get_workflow(workflow_id, backend)


@transactional
def _cancel(tr: Any, workflow_id: str, backend: str) -> Header:
    header = headers.read(tr, workflow_id) if isinstance(workflow_id, str) else None
    if header is None or header.backend != backend:
        raise WorkflowDoesNotExist(f"No workflow {workflow_id!r} in TASKS[{backend!r}].")
    if header.status in (STORING, RUNNING):
        header = headers.finish(tr, header, CANCELLED, {"cancelled": True})
    return header


def not_run_error(header: Header) -> dict[str, str]:
    """The error recorded on a member that will never run, saying why."""
    if header.status == CANCELLED:
        cls: type[Exception] = WorkflowCancelled
        message = f"Not run: workflow {header.id} was cancelled before this task started."
    else:
        cls = WorkflowFailed
        culprit = header.reason
        message = (
            f"Not run: workflow {header.id} failed (on_failure='fail') when member {culprit.get('node')} "
            f"({culprit.get('task_path')}, result {culprit.get('result_id')}) failed, before this task started."
        )
    path = get_module_path(cls)
    return {"exception_class_path": path, "traceback": f"{path}: {message}\n"}


def mark_not_run(tr: Any, header: Header, record: results.Record, index: int) -> int:
    """Finish a member that will never run: FAILED with the reason; its node cancelled. The
    record's new size in bytes."""
    now_us = now_micros()
    backend = headers.backend_of(header.backend)
    done = results.Record(**{**record.__dict__, "status": results.FAILED})
    done.errors = [*record.errors, not_run_error(header)]
    done.finished_us = now_us
    done.expires_us = None if backend is None else backend.retention_end(now_us)
    done = limits.fitted(done)
    results.write(tr, done, record)
    space = Keys(header.id)
    tr[space.state(index)] = NODE_CANCELLED
    tr.add(space.tally("cancelled"), ONE)
    return limits.size(done)


def sweep(db: Any, workflow_id: str) -> None:
    """Mark every member of a stopped workflow that has not started, a page per transaction."""
    begin: int | None = 0
    while begin is not None:
        begin = _sweep_page(db, workflow_id, begin)
    _mark_swept(db, workflow_id)


@transactional
def _sweep_page(tr: Any, workflow_id: str, begin: int) -> int | None:
    """Mark the unstarted members among nodes from ``begin``; the next node to look at, or None."""
    header = headers.read(tr, workflow_id)
    if header is None or header.status not in (FAILED, CANCELLED):
        return None
    space = Keys(workflow_id)
    rows = list(tr.snapshot.get_range(*space.nodes(begin), limit=SWEEP_NODES))
    found = []
    for kv in rows:
        index = space.unpack(bytes(kv.key))[1]
        node = StoredNode.loads(bytes(kv.value))
        found.append((index, tr[space.state(index)], tr[results.record_key(node.result_id)]))
    written = 0
    for index, state, raw in found:
        if written >= SWEEP_BYTES:
            return int(index)
        if (state.present() and bytes(state) in (SETTLED, NODE_CANCELLED)) or not raw.present():
            continue
        record = results.Record.loads(bytes(raw))
        if record.status == results.READY:
            written += mark_not_run(tr, header, record, index)
    return None if len(rows) < SWEEP_NODES else int(found[-1][0]) + 1


@transactional
def _mark_swept(tr: Any, workflow_id: str) -> None:
    header = headers.read(tr, workflow_id)
    if header is not None and header.status in (FAILED, CANCELLED) and not header.swept:
        headers.write(tr, Header(**{**header.__dict__, "swept": True}), header)


def sweep_after_failure(db: Any, record: results.Record) -> None:
    """After a member's FAILED result committed: sweep its workflow if that failure stopped it."""
    if record.workflow is None or record.status != results.FAILED:
        return
    workflow_id, index = record.workflow
    header = headers.get(db, workflow_id)
    if header is not None and header.status == FAILED and not header.swept and header.reason.get("node") == index:
        sweep(db, workflow_id)


__all__ = ["cancel_workflow", "mark_not_run", "not_run_error", "sweep", "sweep_after_failure"]
