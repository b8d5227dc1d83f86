"""What a member's predecessors returned, for the member to read while it runs.

A callback is a task with ``takes_context=True`` that calls ``predecessor_results(context)``:
its predecessors' results in the order they were given (a chord's members in member order), read
a page per transaction, so a callback of 10,000 members never reads them in one transaction.
Results are not passed as arguments: a record holds 100,000 bytes, and 10,000 return values
would not fit; read here they cost only what the callback reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import transactional

from .. import results
from ..compat import TaskError, TaskResultDoesNotExist
from ..exceptions import InvalidWorkflow
from .keys import Keys, unpack_pair

DEFAULT_PAGE = 500
MAX_PAGE = 1_000


@dataclass
class PredecessorResult:
    """One predecessor's outcome. ``status`` is the task's (SUCCESSFUL, FAILED...), or FORGOTTEN
    once its result has passed the retention; ``return_value`` is None unless it succeeded."""

    index: int
    result_id: str
    status: str
    return_value: Any = None
    errors: list[TaskError] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.status == results.SUCCESSFUL


def predecessor_results(of: Any, *, page_size: int = DEFAULT_PAGE) -> Iterator[PredecessorResult]:
    """The results of the nodes ``of`` waits on, in their order, a page per transaction.

    ``of`` is the running task's ``TaskContext`` (``takes_context=True``), a ``TaskResult``, or a
    result id. A member with no predecessors (a root) yields nothing; a task that is no
    workflow's member raises ``InvalidWorkflow``.
    """
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= MAX_PAGE:
        raise InvalidWorkflow(f"page_size must be an integer from 1 to {MAX_PAGE}; got {page_size!r}.")
    result_id = _result_id(of)
    db = get_database()
    record = results.get(db, result_id)
    if record is None:
        raise TaskResultDoesNotExist(result_id)
    if record.workflow is None:
        raise InvalidWorkflow(f"Task result {result_id} is not a workflow's member: it has no predecessors.")
    workflow_id, index = record.workflow
    return _pages(db, workflow_id, index, page_size)


def _pages(db: Any, workflow_id: str, index: int, page_size: int) -> Iterator[PredecessorResult]:
    after: int | None = None
    while True:
        page, after = _page(db, workflow_id, index, after, page_size)
        yield from page
        if after is None:
            return


def _result_id(of: Any) -> str:
    task_result = getattr(of, "task_result", of)  # a TaskContext carries its TaskResult
    result_id = getattr(task_result, "id", task_result)
    if not isinstance(result_id, str):
        raise InvalidWorkflow(
            f"predecessor_results() takes the task's context, a TaskResult or a result id; got {type(of).__name__}."
        )
    return result_id


@transactional
def _page(
    tr: Any, workflow_id: str, index: int, after: int | None, limit: int
) -> tuple[list[PredecessorResult], int | None]:
    space = Keys(workflow_id)
    rows = list(tr.get_range(*space.predecessors(index, after), limit=limit))
    found = []
    for kv in rows:
        position = int(space.unpack(bytes(kv.key))[2])
        node, result_id = unpack_pair(kv.value)
        found.append((position, node, result_id, tr[results.record_key(result_id)]))
    page = []
    for _position, node, result_id, raw in found:
        if not raw.present():
            page.append(PredecessorResult(node, result_id, "FORGOTTEN"))
            continue
        record = results.Record.loads(bytes(raw))
        errors = [TaskError(**error) for error in record.errors]
        value = record.return_value if record.status == results.SUCCESSFUL else None
        page.append(PredecessorResult(node, result_id, record.status, value, errors))
    return page, (found[-1][0] if len(rows) == limit else None)
