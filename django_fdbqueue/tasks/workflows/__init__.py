"""Workflows: chains, groups, chords and any DAG of ``FDBQueueBackend`` tasks, each member run
once its predecessors have finished, and a chord's callback exactly once.

    from django_fdbqueue.tasks.workflows import call, chain, chord, group, predecessor_results

    handle = chord(group(*(call(fetch, url) for url in urls)), call(merge)).enqueue()
    handle.refresh(); handle.status                   # RUNNING, then SUCCESSFUL

    @task(takes_context=True)
    def merge(context):
        return [r.return_value for r in predecessor_results(context)]   # in member order

Members are ordinary tasks (records in ``results``, items in the task queues, run by the same
workers). A node's item is pushed only once it is released: the roots when the workflow starts,
any other node in the very transaction that stores its last predecessor's result (``release``).
Under ``root / "W"`` each workflow keeps a header, its nodes and edges, and per-node counters
split into shards so that members finishing together rarely conflict (``keys`` lists them);
docs/explanation/workflows.md explains the design.

Modules: ``canvas`` (building), ``storing`` (enqueueing), ``release`` (a member's finish),
``stopping`` (cancel, failure), ``reading`` (the handle, the graph, listing), ``predecessors``
(results for a callback), ``items`` (pushing released nodes), ``headers``, ``keys``.
"""

from __future__ import annotations

from .canvas import MAX_NAME, Chain, Chord, Group, Node, Step, Workflow, call, chain, chord, group
from .keys import (
    CANCELLED,
    CONTINUE,
    FAIL,
    FAILED,
    MAX_FAN_OUT,
    MAX_NODES,
    RUNNING,
    STATUSES,
    STORING,
    SUCCESSFUL,
)
from .predecessors import PredecessorResult, predecessor_results
from .reading import (
    NODE_STATES,
    NodeInfo,
    WorkflowPage,
    WorkflowResult,
    as_data,
    get_workflow,
    list_workflows,
    node_data,
    workflow_counts,
)
from .stopping import cancel_workflow

__all__ = [
    "CANCELLED",
    "CONTINUE",
    "Chain",
    "Chord",
    "FAIL",
    "FAILED",
    "Group",
    "MAX_FAN_OUT",
    "MAX_NAME",
    "MAX_NODES",
    "NODE_STATES",
    "Node",
    "NodeInfo",
    "PredecessorResult",
    "RUNNING",
    "STATUSES",
    "STORING",
    "SUCCESSFUL",
    "Step",
    "Workflow",
    "WorkflowPage",
    "WorkflowResult",
    "as_data",
    "call",
    "cancel_workflow",
    "chain",
    "chord",
    "get_workflow",
    "group",
    "list_workflows",
    "node_data",
    "predecessor_results",
    "workflow_counts",
]
