"""Enqueueing a workflow: its nodes stored in batches, then one transaction that starts it.

1. The header is written, status STORING (or found STORING: a call resumed after an error).
2. The nodes, a batch per transaction (at most BATCH_NODES parts and about BATCH_BYTES; a node
   of many edges is split into parts of EDGES_PER_PART): each node's READY task record (naming its workflow and node), its push data, its predecessors in
   order, and its place among each predecessor's successors (with its shard). Each batch reads
   the header, so a workflow cancelled meanwhile stops being stored.
3. One transaction sets the status RUNNING and pushes the roots' items: nothing runs before
   every node is stored, and a crash before it leaves a STORING workflow that runs nothing
   (``cancel_workflow`` clears its records; calling ``enqueue()`` again resumes it).

Every write of steps 1 and 2 is a blind write of values chosen before the first attempt, so a
retry after a lost answer (1021) rewrites the same bytes; step 3 finds the status RUNNING
after an attempt that committed, and pushes nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service.records import now_micros

from .. import results
from ..backend import FDBQueueBackend
from ..compat import task_enqueued
from ..exceptions import InvalidWorkflow
from . import headers
from .items import push_nodes
from .keys import MAX_FAN_OUT, RUNNING, STORING, Header, Keys, StoredNode, pack_pair, pack_shard, shard_plan
from .reading import WorkflowResult, get_workflow

BATCH_NODES = 500
BATCH_BYTES = 500_000
#: Edges written with their node; more go in parts of their own.
EDGES_PER_PART = 2_000


class Built(Protocol):
    """What a built ``canvas.Workflow`` hands over to be stored."""

    id: str
    on_failure: str
    name: str
    backend: FDBQueueBackend | None
    steps: list[Any]
    records: list[results.Record]
    predecessors: list[list[int]]
    successor_counts: list[int]


@dataclass
class Entry:
    """Writes of one node, or of a part of its edges: its record and push data (in its first
    part), and the keys and values of its edges (a node of 10,000 predecessors has 20,000)."""

    index: int
    record: results.Record | None
    node: StoredNode | None
    edges: list[tuple[bytes, bytes]]

    @property
    def cost(self) -> int:
        own = 0 if self.record is None else len(self.record.dumps()) + 300
        return own + sum(len(k) + len(v) for k, v in self.edges)


def check(workflow: Built) -> tuple[FDBQueueBackend, list[int]]:
    """The workflow's backend and roots, or InvalidWorkflow if it cannot be enqueued as it is."""
    backend = workflow.backend
    if backend is None or not workflow.records:
        raise InvalidWorkflow("A workflow needs at least one step.")
    roots = [index for index, before in enumerate(workflow.predecessors) if not before]
    if len(roots) > MAX_FAN_OUT:
        raise InvalidWorkflow(
            f"A workflow starts at most {MAX_FAN_OUT:,} steps at once; {len(roots):,} of this one's wait on nothing."
        )
    return backend, roots


def enqueue_workflow(workflow: Built) -> WorkflowResult:
    """Store and start a built workflow (see the module docstring); its WorkflowResult."""
    backend, roots = check(workflow)
    entries = plan(workflow, backend)
    db = get_database()
    header = Header(
        id=workflow.id,
        backend=backend.alias,
        on_failure=workflow.on_failure,
        size=len(entries),
        created_us=now_micros(),
        name=workflow.name,
        queues=sorted({entry.node.queue for entry in entries if entry.node is not None}),
    )
    if _begin(db, header):
        parts = [part for entry in entries for part in split(entry)]
        for start, stop in batches(parts):
            _store(db, workflow.id, parts[start:stop])
        starts = [node for index in roots if (node := entries[index].node) is not None]
        _launch(db, workflow.id, starts, backend.max_attempts)
    for step, record in zip(workflow.steps, workflow.records):
        task_enqueued.send(type(backend), task_result=backend.to_result(step.task, record))
    return get_workflow(workflow.id, backend.alias)


def plan(workflow: Built, backend: FDBQueueBackend) -> list[Entry]:
    """Each node's writes: its predecessors in order, and its entry in each one's successors."""
    space, size = Keys(workflow.id), len(workflow.records)
    entries = []
    for index, (record, before) in enumerate(zip(workflow.records, workflow.predecessors)):
        node = StoredNode(
            result_id=record.id,
            queue=backend.queue_for(record.queue_name),
            priority=record.priority,
            run_after_us=record.run_after_us,
            key=backend.limit_key(record.kwargs),
            predecessors=len(before),
        )
        edges = []
        if before:
            shards, sizes = shard_plan(len(before))
            for position, predecessor in enumerate(before):
                shard = position % shards
                edges.append(
                    (space.predecessor(index, position), pack_pair(predecessor, workflow.records[predecessor].id))
                )
                edges.append((space.successor(predecessor, index), pack_shard(shard, sizes[shard], shards)))
        entries.append(Entry(index, record, node, edges))
    sinks = [index for index, count in enumerate(workflow.successor_counts) if count == 0]
    shards, sizes = shard_plan(len(sinks))
    for position, sink in enumerate(sinks):  # the end (node ``size``) waits on every sink
        shard = position % shards
        entries[sink].edges.append((space.successor(sink, size), pack_shard(shard, sizes[shard], shards)))
    return entries


def split(entry: Entry) -> list[Entry]:
    """The node's writes in parts of at most EDGES_PER_PART edges (the first with its record)."""
    edges = entry.edges
    parts = [Entry(entry.index, entry.record, entry.node, edges[:EDGES_PER_PART])]
    for start in range(EDGES_PER_PART, len(edges), EDGES_PER_PART):
        parts.append(Entry(entry.index, None, None, edges[start : start + EDGES_PER_PART]))
    return parts


def batches(entries: list[Entry]) -> list[tuple[int, int]]:
    """[start, stop) spans of at most BATCH_NODES entries and about BATCH_BYTES each."""
    spans, start, cost = [], 0, 0
    for index, entry in enumerate(entries):
        if index > start and (index - start >= BATCH_NODES or cost + entry.cost > BATCH_BYTES):
            spans.append((start, index))
            start, cost = index, 0
        cost += entry.cost
    spans.append((start, len(entries)))
    return spans


@transactional
def _begin(tr: Any, header: Header) -> bool:
    """Write the header (STORING); False if an earlier call of this workflow's enqueue started it."""
    found = headers.read(tr, header.id)
    if found is None:
        headers.write(tr, header, None)
        return True
    return found.status == STORING


@transactional
def _store(tr: Any, workflow_id: str, entries: list[Entry]) -> None:
    header = headers.read(tr, workflow_id)
    if header is None or header.status != STORING:
        status = "forgotten" if header is None else header.status
        raise InvalidWorkflow(f"Workflow {workflow_id} stopped being stored: it is {status} (cancelled meanwhile?).")
    space = Keys(workflow_id)
    for entry in entries:
        if entry.record is not None and entry.node is not None:
            results.write(tr, entry.record, None)
            tr[space.node(entry.index)] = entry.node.dumps()
        for key, value in entry.edges:
            tr[key] = value


@transactional
def _launch(tr: Any, workflow_id: str, roots: list[StoredNode], max_attempts: int | None) -> None:
    """RUNNING, and the roots' items pushed, together; nothing if an earlier attempt committed."""
    header = headers.read(tr, workflow_id)
    if header is None or header.status != STORING:
        return  # started by an earlier attempt whose answer was lost (or cancelled since)
    headers.write(tr, Header(**{**header.__dict__, "status": RUNNING}), header)
    push_nodes(tr, roots, max_attempts)
