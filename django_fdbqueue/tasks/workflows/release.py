"""A member's finish: its node settled, counted toward its successors, those complete released.

``settle`` runs inside the transaction that stores the member's finished result (the runner's
``_finish``, itself inside the worker's ack transaction), so a successor's item is pushed in the
same commit as its last predecessor's result, or not at all. A retry of that transaction after a
lost answer (1021) finds the result already stored and does not call ``settle`` again; and a
node is settled once ever (its ``x`` key), so a member retried by hand later releases nothing.

**Fan-in.** A node waiting on N predecessors splits them into S = min(64, ceil(sqrt(N))) shards
(position p in shard p % S). A predecessor's finish reads and increments its shard's counter, an
ordinary read, so it conflicts only with the other members of that shard; the one that sees its
shard complete reads and increments the node's count of complete shards; the one that completes
the last shard releases the node. A shard of one member skips its counter. A chain link (one
predecessor) has no counter at all: its release costs one read and a push inside the finish.

**Failure.** Under ``on_failure="continue"`` a FAILED member counts as settled like a successful
one. Under ``"fail"`` its finish stops the workflow instead (the header's status, FAILED): no
successor is counted or released, and ``stopping`` marks what will never run.

**The end.** Node ``size`` stands for the workflow's end, whose predecessors are the sinks: the
finish that completes it gives the workflow its final status (FAILED if any member failed).
"""

from __future__ import annotations

import logging
from typing import Any

from .. import results
from . import headers, stopping
from .items import push_nodes
from .keys import (
    CANCELLED,
    FAIL,
    FAILED,
    ONE,
    RELEASED,
    RUNNING,
    SETTLED,
    STORING,
    SUCCESSFUL,
    Header,
    Keys,
    StoredNode,
    count_of,
    counter,
    unpack_shard,
)

logger = logging.getLogger("django_fdbqueue.worker.tasks")


def settle(tr: Any, record: results.Record) -> None:
    """In the transaction storing a member's finished ``record``: count it, release what it completes."""
    if record.workflow is None:
        return
    workflow_id, index = record.workflow
    space = Keys(workflow_id)
    raw_header, state = tr[space.header], tr[space.state(index)]
    if not raw_header.present() or (state.present() and bytes(state) == SETTLED):
        return  # forgotten, or settled at its first finish (this is a run retried by hand)
    tr[space.state(index)] = SETTLED
    succeeded = record.status == results.SUCCESSFUL
    tr.add(space.tally("succeeded" if succeeded else "failed"), ONE)
    header = Header.loads(bytes(raw_header))
    if header.status != RUNNING:
        return  # stopped: its result is recorded, it releases nothing
    if not succeeded and header.on_failure == FAIL:
        reason = {"node": index, "result_id": record.id, "task_path": record.task_path}
        headers.finish(tr, header, FAILED, reason)
        return
    complete = _arrive(tr, space, index)
    waiting = [j for j in complete if j != header.size]
    if waiting:
        _release(tr, space, header, waiting)
    if header.size in complete:
        _end(tr, space, header)


def _arrive(tr: Any, space: Keys, index: int) -> list[int]:
    """Count node ``index`` toward each successor; the successors it completes."""
    successors = []
    for kv in tr.snapshot.get_range(*space.successors(index)):  # written once, at enqueue
        shard, size, shards = unpack_shard(kv.value)
        successors.append((space.unpack(bytes(kv.key))[2], shard, size, shards))
    complete = [j for j, _shard, size, shards in successors if shards == 1 and size == 1]
    shard_done = [(j, shards) for j, _shard, size, shards in successors if size == 1 and shards > 1]
    counted = [(j, shard, size, shards, tr[space.shard(j, shard)]) for j, shard, size, shards in successors if size > 1]
    for j, shard, size, shards, raw in counted:
        count = count_of(raw) + 1
        tr[space.shard(j, shard)] = counter(count)
        if count == size and shards == 1:
            complete.append(j)
        elif count == size:
            shard_done.append((j, shards))
    done = [(j, shards, tr[space.shards_done(j)]) for j, shards in shard_done]
    for j, shards, raw in done:
        count = count_of(raw) + 1
        tr[space.shards_done(j)] = counter(count)
        if count == shards:
            complete.append(j)
    return complete


def _release(tr: Any, space: Keys, header: Header, nodes: list[int]) -> None:
    """Mark the nodes released and push their items (a node already released is left alone)."""
    found = [(j, tr[space.node(j)], tr[space.state(j)]) for j in nodes]
    ready = []
    for j, raw, state in found:
        if state.present() or not raw.present():
            continue  # released already: cannot happen while the counters hold, guarded anyway
        tr[space.state(j)] = RELEASED
        ready.append(StoredNode.loads(bytes(raw)))
    backend = headers.backend_of(header.backend)
    push_nodes(tr, ready, None if backend is None else backend.max_attempts)


def _end(tr: Any, space: Keys, header: Header) -> None:
    """Every node has settled: the workflow's final status."""
    failed = count_of(tr[space.tally("failed")])
    # Nothing is left to mark (swept): every node ran.
    headers.finish(tr, header, FAILED if failed else SUCCESSFUL, {"failed": failed} if failed else None, swept=True)


def admitted(tr: Any, record: results.Record) -> bool:
    """In a claim's transaction: whether this member may run now (False: drop its item unrun).

    Not if its workflow was cancelled, or failed under ``on_failure="fail"``, after its item was
    pushed: its record is then marked FAILED. Nor if it was never released (an item pushed by
    hand, naming a member whose predecessors have not all finished): the item is dropped and the
    member runs when it is released. A member that settled once (it ran, and is now retried by
    hand) runs: it releases nothing.
    """
    if record.workflow is None:
        return True
    workflow_id, index = record.workflow
    space = Keys(workflow_id)
    raw_header, state, raw_node = tr[space.header], tr[space.state(index)], tr[space.node(index)]
    if not raw_header.present() or (state.present() and bytes(state) == SETTLED):
        return True
    header = Header.loads(bytes(raw_header))
    if header.status in (FAILED, CANCELLED):
        stopping.mark_not_run(tr, header, record, index)
        return False
    root = raw_node.present() and StoredNode.loads(bytes(raw_node)).predecessors == 0
    if header.status == STORING or not (state.present() or root):
        logger.warning(
            "Task %s is node %s of workflow %s, which waits on nodes not finished yet: dropping an item "
            "that names it (it runs once they finish).",
            record.id,
            index,
            workflow_id,
        )
        return False
    return True
