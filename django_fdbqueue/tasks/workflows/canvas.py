"""Building workflows: steps (``call``), ``chain``, ``group``, ``chord``, and ``Workflow`` for any DAG.

A step is a task and its arguments, checked as ``Task.enqueue`` would check them. ``chain``,
``group`` and ``chord`` combine steps and each other, and enqueue as one workflow; ``Workflow``
takes nodes one by one, each after nodes already added, so a cycle cannot be written. Every
check happens while the workflow is built, before anything is stored: a step's task must use an
``FDBQueueBackend`` (the same alias for every step), its arguments must be JSON and fit its
result record, and a workflow needs at least one step.

Nodes are numbered in the order they are added; a chain, group or chord adds its steps depth
first, in the order written (``chain(a, group(b, c), d)``: a=0, b=1, c=2, d=3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, overload

from asgiref.sync import sync_to_async

from django_fdbqueue.service.records import now_micros

from .. import results
from ..backend import FDBQueueBackend, json_arguments
from ..compat import InvalidTaskError, Task, task_backends
from ..exceptions import InvalidTaskArguments, InvalidWorkflow
from .keys import CONTINUE, FAIL, MAX_FAN_OUT, MAX_NODES, POLICIES
from .reading import WorkflowResult
from .storing import check, enqueue_workflow

MAX_NAME = 200
#: A member's run_after may be at most this far ahead (a queue item's delay limit).
MAX_DELAY_US = 366 * 86_400 * 1_000_000


class Enqueueable:
    """What a step, chain, group or chord can do alone: be enqueued as a workflow of its own."""

    def enqueue(self, *, on_failure: str = FAIL, name: str = "") -> WorkflowResult:
        """Enqueue this as a workflow of its own (see :class:`Workflow` for ``on_failure``)."""
        workflow = Workflow(on_failure=on_failure, name=name)
        workflow.add(self)  # type: ignore[call-overload]  # every subclass is a Part
        return workflow.enqueue()

    async def aenqueue(self, *, on_failure: str = FAIL, name: str = "") -> WorkflowResult:
        """``enqueue`` for async code (run on a thread, as the framework's ``aenqueue``)."""
        return await sync_to_async(self.enqueue, thread_sensitive=False)(on_failure=on_failure, name=name)


@dataclass(frozen=True)
class Step(Enqueueable):
    """One task to run, with its arguments (made by :func:`call`)."""

    task: Task[Any, Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def call(task: Task[Any, Any], /, *args: Any, **kwargs: Any) -> Step:
    """A step: ``task`` called with these arguments (JSON, as ``Task.enqueue`` requires)."""
    if not isinstance(task, Task):
        raise InvalidWorkflow(f"call() takes a task (a function decorated with @task), not {_kind(task)}.")
    try:
        json_arguments(args, kwargs)
    except InvalidTaskArguments as error:
        raise InvalidTaskArguments(f"{task.module_path}: {error}") from None
    return Step(task, tuple(args), dict(kwargs))


@dataclass(frozen=True)
class Chain(Enqueueable):
    """Parts run one after another; each starts once the previous one has finished."""

    parts: tuple["Part", ...]


@dataclass(frozen=True)
class Group(Enqueueable):
    """Parts run side by side; what follows a group waits for all of them."""

    parts: tuple["Part", ...]


@dataclass(frozen=True)
class Chord(Enqueueable):
    """A group, then a callback that runs once, after all of its members."""

    members: Group
    callback: "Part"


Part = Step | Chain | Group | Chord


def _parts(kind: str, parts: Iterable[Any]) -> tuple[Part, ...]:
    found = tuple(parts)
    if not found:
        raise InvalidWorkflow(f"{kind}() needs at least one step.")
    for position, part in enumerate(found):
        if not isinstance(part, (Step, Chain, Group, Chord)):
            hint = " (wrap a task with its arguments: call(task, ...))" if isinstance(part, Task) else ""
            raise InvalidWorkflow(f"{kind}() part {position} is {_kind(part)}, not a step{hint}.")
    return found


def chain(*parts: Part) -> Chain:
    """``chain(call(a), call(b), call(c))``: a, then b, then c."""
    return Chain(_parts("chain", parts))


def group(*parts: Part) -> Group:
    """``group(call(a, 1), call(a, 2))``: both at once."""
    return Group(_parts("group", parts))


def chord(members: Group | Iterable[Part], callback: Part) -> Chord:
    """``chord(group(...), call(total))``: the callback once, after every member; it reads their
    results, in member order, with ``predecessor_results(context)``."""
    if not isinstance(members, Group):
        members = group(*members) if isinstance(members, Iterable) else group(members)
    (callback,) = _parts("chord callback", [callback])
    return Chord(members, callback)


def _kind(value: Any) -> str:
    """What a refused value is, for the message."""
    if isinstance(value, Task):
        return f"the Task {value.module_path}"
    if callable(value) and hasattr(value, "__qualname__"):
        return f"the function {value.__qualname__} (is it decorated with @task?)"
    return f"a {type(value).__name__}"


@dataclass(frozen=True)
class Node:
    """A node of a :class:`Workflow`: its index and its task result's id (known before enqueue)."""

    workflow_id: str
    index: int
    result_id: str


class Workflow:
    """A graph of steps, each after steps already added: ``node = wf.add(call(...), after=[...])``.

    ``on_failure``: "fail" (a member's failure fails the workflow; what has not started never
    runs) or "continue" (what follows runs anyway and sees the failure in its predecessors'
    results). ``enqueue()`` stores it and starts it.
    """

    def __init__(self, *, on_failure: str = FAIL, name: str = "") -> None:
        if on_failure not in POLICIES:
            raise InvalidWorkflow(f"on_failure must be {FAIL!r} or {CONTINUE!r}; got {on_failure!r}.")
        if not isinstance(name, str) or len(name) > MAX_NAME:
            raise InvalidWorkflow(f"name must be a string of at most {MAX_NAME} characters.")
        self.id = results.new_id()
        self.on_failure = on_failure
        self.name = name
        self.backend: FDBQueueBackend | None = None
        self.steps: list[Step] = []
        self.records: list[results.Record] = []
        self.predecessors: list[list[int]] = []
        self.successor_counts: list[int] = []
        self.enqueued = False
        self.frozen = False  # an enqueue began: what may be stored already must not change

    def __len__(self) -> int:
        return len(self.records)

    @overload
    def add(self, part: Step, after: Iterable[Node] = ()) -> Node: ...

    @overload
    def add(self, part: Chain | Group | Chord, after: Iterable[Node] = ()) -> list[Node]: ...

    def add(self, part: Part, after: Iterable[Node] = ()) -> Node | list[Node]:
        """Add a step (its ``Node``) or a chain, group or chord (the nodes that end it), to run
        once every node of ``after`` (nodes of this workflow) has finished."""
        if self.frozen:
            raise InvalidWorkflow(
                f"Workflow {self.id} is enqueued already, or its enqueue began (call enqueue() again to "
                "finish it): build a new one to add steps."
            )
        if isinstance(after, Node):
            after = [after]
        mark, backend = len(self.records), self.backend
        try:
            ends = self.attach(part, self.checked_after(after))
        except BaseException:
            self.undo(mark, backend)  # a part refused halfway leaves none of its steps behind
            raise
        return ends[0] if isinstance(part, Step) else ends

    def undo(self, mark: int, backend: FDBQueueBackend | None) -> None:
        """Forget the steps added from node ``mark`` on."""
        for before in self.predecessors[mark:]:
            for index in before:
                self.successor_counts[index] -= 1
        for added in (self.steps, self.records, self.predecessors, self.successor_counts):
            del added[mark:]
        self.backend = backend

    def checked_after(self, after: Iterable[Node]) -> list[Node]:
        nodes = list(after) if isinstance(after, Iterable) else [after]
        seen = set()
        for node in nodes:
            if not isinstance(node, Node):
                raise InvalidWorkflow(f"after= takes nodes that add() returned, not {_kind(node)}.")
            if node.workflow_id != self.id:
                raise InvalidWorkflow(f"Node {node.index} belongs to another workflow ({node.workflow_id}).")
            if node.index in seen:
                raise InvalidWorkflow(f"Node {node.index} is listed twice in after=.")
            seen.add(node.index)
        return nodes

    def attach(self, part: Any, after: list[Node]) -> list[Node]:
        """Add ``part`` after ``after``; the nodes it ends with (what comes next waits on them)."""
        if isinstance(part, Step):
            return [self.add_step(part, after)]
        if isinstance(part, Chain):
            for link in part.parts:
                after = self.attach(link, after)
            return after
        if isinstance(part, Group):
            return [end for member in part.parts for end in self.attach(member, after)]
        if isinstance(part, Chord):
            return self.attach(part.callback, self.attach(part.members, after))
        raise InvalidWorkflow(f"add() takes a step (call(task, ...)), chain, group or chord, not {_kind(part)}.")

    def add_step(self, step: Step, after: list[Node]) -> Node:
        """Check the step against the workflow (backend, record, limits) and add it as a node."""
        index = len(self.records)
        if index >= MAX_NODES:
            raise InvalidWorkflow(f"A workflow has at most {MAX_NODES:,} steps.")
        for node in after:
            if self.successor_counts[node.index] >= MAX_FAN_OUT:
                raise InvalidWorkflow(f"Node {node.index} would have over {MAX_FAN_OUT:,} steps waiting on it.")
        backend = self.backend_for(step, index)
        try:
            record = backend.new_record(step.task, step.args, step.kwargs)
        except InvalidTaskError as error:
            raise type(error)(f"Step {index} ({step.task.module_path}): {error}") from None
        if record.run_after_us is not None and record.run_after_us - now_micros() > MAX_DELAY_US:
            raise InvalidWorkflow(f"Step {index} ({step.task.module_path}): run_after is over 366 days ahead.")
        record.workflow = [self.id, index]
        self.steps.append(step)
        self.records.append(record)
        self.predecessors.append([node.index for node in after])
        self.successor_counts.append(0)
        for node in after:
            self.successor_counts[node.index] += 1
        return Node(self.id, index, record.id)

    def backend_for(self, step: Step, index: int) -> FDBQueueBackend:
        """The step's backend: an FDBQueueBackend, the same alias as the workflow's other steps."""
        alias = step.task.backend
        try:
            backend = task_backends[alias]
        except Exception as error:  # noqa: BLE001 - an unknown alias, or a backend that cannot load
            raise InvalidWorkflow(f"Step {index} ({step.task.module_path}): TASKS[{alias!r}]: {error}") from None
        if not isinstance(backend, FDBQueueBackend):
            raise InvalidWorkflow(
                f"Step {index} ({step.task.module_path}) uses TASKS[{alias!r}], a {type(backend).__name__}: "
                "workflows run on FDBQueueBackend only."
            )
        if self.backend is not None and backend.alias != self.backend.alias:
            raise InvalidWorkflow(
                f"Step {index} ({step.task.module_path}) uses TASKS[{alias!r}], and the workflow's earlier "
                f"steps TASKS[{self.backend.alias!r}]: every step of a workflow uses one backend."
            )
        self.backend = backend
        return backend

    def enqueue(self) -> WorkflowResult:
        """Store the workflow and start its roots; its ``WorkflowResult``. Safe to call again
        after an error (it resumes); refused once it succeeded."""
        if self.enqueued:
            raise InvalidWorkflow(f"Workflow {self.id} is enqueued already: build a new one to run it again.")
        check(self)  # refused as it is: steps may still be added
        self.frozen = True
        handle = enqueue_workflow(self)
        self.enqueued = True
        return handle

    async def aenqueue(self) -> WorkflowResult:
        """``enqueue`` for async code (run on a thread, as the framework's ``aenqueue``)."""
        return await sync_to_async(self.enqueue, thread_sensitive=False)()
