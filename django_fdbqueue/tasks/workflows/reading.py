"""Reading workflows: one by id (``WorkflowResult``), its graph a page of nodes at a time, and
the list of a backend's workflows in one status, oldest first.

Every read is one short transaction; the graph of a large workflow and a long list are read a
page at a time, so no read holds a transaction near FoundationDB's five seconds.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service.records import to_datetime

from .. import results
from ..compat import TaskResult
from ..exceptions import InvalidWorkflow, WorkflowDoesNotExist
from . import headers, keys
from .keys import CANCELLED, DEFAULT_ALIAS, FAILED, FINISHED, NODE_CANCELLED, RELEASED, STATUSES, STORING, Keys

#: A node's state in the graph: its task's status once it may run, else why it does not.
WAITING = "WAITING"  # some predecessor has not settled (or the workflow is still being stored)
NODE_STATES = (WAITING, "READY", "RUNNING", "SUCCESSFUL", "FAILED", CANCELLED, "FORGOTTEN")
MAX_PAGE = 1_000


def _moment(micros: int | None) -> dt.datetime | None:
    return None if micros is None else to_datetime(micros)


@dataclass
class NodeInfo:
    """One node of a workflow's graph, as :meth:`WorkflowResult.nodes` reads it."""

    index: int
    result_id: str
    task_path: str | None  # None once the member's result is forgotten (retention)
    state: str  # one of NODE_STATES
    attempts: int
    predecessor_count: int


@dataclass
class WorkflowResult:
    """A workflow as stored: status, counts, and (a page at a time) its nodes. ``refresh()`` re-reads.

    ``status`` is STORING (being enqueued), RUNNING, then SUCCESSFUL (every member succeeded),
    FAILED (a member failed) or CANCELLED. ``succeeded``, ``failed`` and ``cancelled`` count the
    members so far; ``reason`` says why it FAILED or was CANCELLED.
    """

    id: str
    backend: str
    status: str
    on_failure: str
    name: str
    size: int
    created_at: dt.datetime
    finished_at: dt.datetime | None
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    reason: dict[str, Any] = field(default_factory=dict)
    swept: bool = False
    member_queues: list[str] | None = field(default=None, repr=False)  # the header's, if it kept them

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    def refresh(self) -> None:
        """Read the workflow again (status, counts)."""
        self.__dict__.update(get_workflow(self.id, self.backend).__dict__)

    def result(self, node: Any) -> TaskResult[Any]:
        """The TaskResult of a node (a ``Node`` from ``Workflow.add``, or its index)."""
        index = getattr(node, "index", node)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < self.size:
            raise InvalidWorkflow(f"Workflow {self.id} has nodes 0 to {self.size - 1}; got {node!r}.")
        backend = headers.backend_of(self.backend)
        node_data = _node(get_database(), self.id, index)
        if backend is None or node_data is None:
            raise WorkflowDoesNotExist(f"Workflow {self.id} is no longer stored in TASKS[{self.backend!r}].")
        return backend.get_result(node_data.result_id)

    def nodes(self, after: int | None = None, limit: int = 100) -> list[NodeInfo]:
        """Nodes in index order, from the one after ``after``; at most ``limit`` (up to MAX_PAGE)."""
        limit = _limit(limit)
        begin = 0 if after is None else after + 1
        return _nodes(get_database(), self.id, begin, limit)

    def queues(self) -> set[str]:
        """Our queues (``QUEUE_PREFIX + queue_name``) its members' items go to: the queues whose
        grants decide who may see or stop it (the REST API, the admin). Kept in the header; a
        workflow stored before it kept them has its nodes read, a page per transaction."""
        if self.member_queues is not None:
            return set(self.member_queues)
        found: set[str] = set()
        begin: int | None = 0
        while begin is not None:
            begin = _queues_page(get_database(), self.id, begin, found)
        return found

    def predecessors(self, node: Any, after: int | None = None, limit: int = MAX_PAGE) -> list[int]:
        """The indices a node waits on, in the order given (a page: positions after ``after``)."""
        index = getattr(node, "index", node)
        return _predecessors(get_database(), self.id, index, after, _limit(limit))


def _limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidWorkflow(f"limit must be an integer from 1 to {MAX_PAGE}; got {limit!r}.")
    return limit


def get_workflow(workflow_id: str, backend: str = DEFAULT_ALIAS) -> WorkflowResult:
    """The workflow of that id enqueued on TASKS[backend] (``WorkflowDoesNotExist`` otherwise)."""
    found = _read(get_database(), workflow_id) if isinstance(workflow_id, str) else None
    if found is None or found.backend != backend:
        raise WorkflowDoesNotExist(f"No workflow {workflow_id!r} in TASKS[{backend!r}].")
    return found


@transactional
def _read(tr: Any, workflow_id: str) -> WorkflowResult | None:
    space = Keys(workflow_id)
    raw = tr[space.header]
    tallies = {name: tr[space.tally(name)] for name in ("succeeded", "failed", "cancelled")}
    if not raw.present():
        return None
    return _result(keys.Header.loads(bytes(raw)), {name: keys.count_of(f) for name, f in tallies.items()})


def _result(header: keys.Header, tallies: dict[str, int]) -> WorkflowResult:
    return WorkflowResult(
        id=header.id,
        backend=header.backend,
        status=header.status,
        on_failure=header.on_failure,
        name=header.name,
        size=header.size,
        created_at=to_datetime(header.created_us),
        finished_at=_moment(header.finished_us),
        reason=dict(header.reason),
        swept=header.swept,
        member_queues=None if header.queues is None else list(header.queues),
        **tallies,
    )


@transactional
def _node(tr: Any, workflow_id: str, index: int) -> keys.StoredNode | None:
    raw = tr[Keys(workflow_id).node(index)]
    return keys.StoredNode.loads(bytes(raw)) if raw.present() else None


@transactional
def _nodes(tr: Any, workflow_id: str, begin: int, limit: int) -> list[NodeInfo]:
    space = Keys(workflow_id)
    raw_header = tr[space.header]
    rows = list(tr.get_range(*space.nodes(begin), limit=limit))
    found = []
    for kv in rows:
        index = space.unpack(bytes(kv.key))[1]
        node = keys.StoredNode.loads(bytes(kv.value))
        found.append((index, node, tr[space.state(index)], tr[results.record_key(node.result_id)]))
    if not raw_header.present():
        return []
    header = keys.Header.loads(bytes(raw_header))
    return [_info(header, index, node, state, raw) for index, node, state, raw in found]


def _info(header: keys.Header, index: int, node: keys.StoredNode, state: Any, raw: Any) -> NodeInfo:
    record = results.Record.loads(bytes(raw)) if raw.present() else None
    mark = bytes(state) if state.present() else None
    info = NodeInfo(
        index, node.result_id, None if record is None else record.task_path, "FORGOTTEN", 0, node.predecessors
    )
    if record is None:
        return info
    info.attempts = len(record.worker_ids)
    released = mark == RELEASED or (node.predecessors == 0 and header.status != STORING)
    if mark == NODE_CANCELLED:
        info.state = CANCELLED
    elif record.status != results.READY:
        info.state = record.status
    elif header.status in (FAILED, CANCELLED) and mark is None:
        info.state = CANCELLED  # stopped before it started: not marked yet (see stopping.sweep)
    else:
        info.state = "READY" if released else WAITING
    return info


@transactional
def _queues_page(tr: Any, workflow_id: str, begin: int, found: set[str]) -> int | None:
    """Add the queues of nodes from ``begin`` to ``found``; the next node to read, or None."""
    space = Keys(workflow_id)
    rows = list(tr.get_range(*space.nodes(begin), limit=MAX_PAGE))
    found.update(keys.StoredNode.loads(bytes(kv.value)).queue for kv in rows)
    return None if len(rows) < MAX_PAGE else int(space.unpack(bytes(rows[-1].key))[1]) + 1


@transactional
def _predecessors(tr: Any, workflow_id: str, index: int, after: int | None, limit: int) -> list[int]:
    space = Keys(workflow_id)
    return [int(keys.unpack_pair(kv.value)[0]) for kv in tr.get_range(*space.predecessors(index, after), limit=limit)]


@dataclass
class WorkflowPage:
    """A page of workflows; ``next`` is the ``after`` of the next page (None: the last page)."""

    items: list[WorkflowResult]
    next: str | None


def list_workflows(
    status: str, *, backend: str = DEFAULT_ALIAS, after: str | None = None, limit: int = 50
) -> WorkflowPage:
    """A backend's workflows in one status, oldest created first, a page at a time."""
    if status not in STATUSES:
        raise InvalidWorkflow(f"status must be one of {', '.join(STATUSES)}; got {status!r}.")
    return _list(get_database(), backend, status, _cursor(after), _limit(limit))


def _cursor(after: str | None) -> tuple[int, str] | None:
    if after is None:
        return None
    created, _, workflow_id = after.partition(".") if isinstance(after, str) else ("", "", "")
    if not created.isdigit() or not workflow_id:
        raise InvalidWorkflow(f"after must be a page's next cursor; got {after!r}.")
    return int(created), workflow_id


@transactional
def _list(tr: Any, backend: str, status: str, after: tuple[int, str] | None, limit: int) -> WorkflowPage:
    rows = list(tr.get_range(*keys.listing_range(backend, status, after), limit=limit + 1))
    ids = [keys.listing_unpack(bytes(kv.key))[3] for kv in rows[:limit]]
    read = [_read(tr, workflow_id) for workflow_id in ids]
    items = [found for found in read if found is not None]
    last = keys.listing_unpack(bytes(rows[limit - 1].key)) if len(rows) > limit else None
    return WorkflowPage(items, None if last is None else f"{last[2]}.{last[3]}")


def workflow_counts(backend: str = DEFAULT_ALIAS, limit: int = 1_000) -> dict[str, int]:
    """How many of a backend's workflows are in each status (counting up to ``limit`` each)."""
    return _counts(get_database(), backend, limit)


@transactional
def _counts(tr: Any, backend: str, limit: int) -> dict[str, int]:
    ranges = {status: tr.get_range(*keys.listing_range(backend, status, None), limit=limit) for status in STATUSES}
    return {status: sum(1 for _ in rows) for status, rows in ranges.items()}


def _iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")


def as_data(workflow: WorkflowResult) -> dict[str, Any]:
    """A workflow's header as JSON-ready data, times in ISO 8601: what ``--json`` and the REST API show."""
    return {
        "id": workflow.id,
        "backend": workflow.backend,
        "name": workflow.name,
        "status": workflow.status,
        "on_failure": workflow.on_failure,
        "size": workflow.size,
        "succeeded": workflow.succeeded,
        "failed": workflow.failed,
        "cancelled": workflow.cancelled,
        "created_at": _iso(workflow.created_at),
        "finished_at": _iso(workflow.finished_at),
        "reason": workflow.reason,
    }


def node_data(node: NodeInfo) -> dict[str, Any]:
    """A node as JSON-ready data (``predecessors``: how many it waits on)."""
    return {
        "index": node.index,
        "result_id": node.result_id,
        "task_path": node.task_path,
        "state": node.state,
        "attempts": node.attempts,
        "predecessors": node.predecessor_count,
    }
