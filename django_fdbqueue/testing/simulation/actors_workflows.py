"""Workflows among the Tasks workers: an enqueuer enqueues small workflows, the task workers run them.

Each workflow is a chain of 3, a chord of 4 to 8 members and a callback, or a diamond (a, then b
and c, then d), its policy "fail" or "continue"; its members are simulated tasks that take
virtual time and now and then raise, and the enqueuer cancels some of them midway. The workers
(``actors_tasks``, which die between a claim and the task's step now and then) run the members
like any task. What the workflows promise, the "workflow" verdict:

* **a member is released only once its predecessors are done**, and **once**: every push of a
  member's item (at launch, or by a finish) is watched, committed or not: its workflow must be
  RUNNING in that transaction, each predecessor's record SUCCESSFUL (policy "fail") or finished
  ("continue"), and the member never pushed before (a key of the simulation's own, read and
  written in the pushing transaction: two pushes that both commit conflict there, and the
  second sees the first's);
* **nothing starts once its workflow stopped**: no transaction marks a member RUNNING while its
  workflow is CANCELLED or FAILED (checked on every write of a member's record);
* **a callback reads its predecessors' results in their order**: the simulated callback checks
  ``predecessor_results`` against the nodes it waits on and what their runs returned;
* **every workflow ends**: after the last worker's drain (faults off; the sweep of a stopped
  workflow cut short finished, as ``cancel_workflow`` again would), every workflow whose enqueue
  returned is SUCCESSFUL, FAILED or CANCELLED, as its members' states say; every member ran only
  after its predecessors (each state read back); the tallies equal a recount of its nodes. A
  workflow whose enqueue was stopped midway may be left STORING, none of its members run.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

from django_fdbqueue.tasks import results
from django_fdbqueue.tasks import runner as tasks_runner
from django_fdbqueue.tasks.compat import Task
from django_fdbqueue.tasks.workflows import (
    CANCELLED,
    CONTINUE,
    FAIL,
    FAILED,
    RUNNING,
    STORING,
    SUCCESSFUL,
    Workflow,
    call,
    cancel_workflow,
    chain,
    chord,
    get_workflow,
    group,
    predecessor_results,
)
from django_fdbqueue.tasks.workflows import predecessors as wf_predecessors
from django_fdbqueue.tasks.workflows import reading as wf_reading
from django_fdbqueue.tasks.workflows import release as wf_release
from django_fdbqueue.tasks.workflows import stopping as wf_stopping
from django_fdbqueue.tasks.workflows import storing as wf_storing
from django_fdbqueue.tasks.workflows.keys import Header, Keys, StoredNode

ALIAS = "fdbqueue-simulation"
#: Where the simulation marks the members it saw pushed (outside the app's keys).
PUSHED = b"\x00fdbqueue-simulation/pushed/"
#: The run in progress, for the tasks (which run inside the workers' code).
_RUN: "Workflows | None" = None
RAN = (results.SUCCESSFUL, results.FAILED)


@dataclass
class Planned:
    """A workflow the enqueuer built: its nodes' result ids and predecessors, what became of it."""

    id: str
    kind: str
    on_failure: str
    result_ids: list[str]
    predecessors: list[list[int]]
    returned: bool = False  # its enqueue returned
    cancel: bool = False  # a cancel was called (returned or not)
    notes: list[str] = field(default_factory=list)


def _member(context: Any, n: int, fails: bool) -> str:
    """A member: counts its runs (the Tasks oracle's tokens), takes a while, raises if told to."""
    run = _RUN
    assert run is not None, "the simulation's workflow task runs inside a simulation only"
    result_id = context.task_result.id
    tasks = run.tasks
    tasks.runs[result_id] += 1
    token = f"w{n}#{tasks.runs[result_id]}"
    tasks.tokens[result_id].add(token)
    if run.actors.scheduler.current() is not None:
        time.sleep(random.choice([0.0, 0.1, 0.5, 1.0, 3.0]))  # virtual; 3 s outlives the lease
    if fails:
        raise RuntimeError(f"simulated failure of member {n}")
    return token


def _callback(context: Any, n: int, fails: bool) -> str:
    """A node after others: checks their results (in order, as they returned), then as a member."""
    run = _RUN
    assert run is not None, "the simulation's workflow task runs inside a simulation only"
    run.check_predecessors(context.task_result.id, list(predecessor_results(context)))
    return _member(context, n, fails)


_member.__name__ = _member.__qualname__ = "sim_member"
_callback.__name__ = _callback.__qualname__ = "sim_callback"


def __getattr__(name: str) -> Any:
    """``sim_member``, ``sim_callback``: the Tasks (made when asked for, as in ``actors_tasks``)."""
    if name in ("sim_member", "sim_callback"):
        return Task(func=_member if name == "sim_member" else _callback, backend=ALIAS, takes_context=True)
    raise AttributeError(name)


class Workflows:
    """The workflow enqueuer and the oracle of its workflows (see the module's docstring)."""

    def __init__(self, tasks: Any) -> None:
        self.tasks = tasks
        self.actors = tasks.actors
        self.planned: list[Planned] = []
        self.nodes: dict[str, tuple[Planned, int]] = {}  # result id: its workflow and node

    def violate(self, detail: str) -> None:
        self.actors.history.violate("workflow", detail)

    def replaced(self, write: Callable[..., None]) -> list[tuple[Any, str, Any]]:
        """What the run replaces: the workflows' database the run's, pushes and ``write`` (the
        result records' write, as the Tasks oracle watches it) watched."""
        db = self.actors.db
        found: list[tuple[Any, str, Any]] = [
            (module, "get_database", lambda: db)
            for module in (wf_storing, wf_stopping, wf_reading, wf_predecessors, tasks_runner)
        ]
        found += [(module, "push_nodes", self._watched_push(module.push_nodes)) for module in (wf_release, wf_storing)]
        found.append((results, "write", self._watched_write(write)))
        return found

    def start(self) -> None:
        global _RUN
        _RUN = self

    def stop(self) -> None:
        global _RUN
        _RUN = None

    # -- the watches --------------------------------------------------------------------------------

    def _watched_push(self, push: Callable[..., int]) -> Callable[..., int]:
        def watched(tr: Any, nodes: Any, max_attempts: int | None) -> int:
            nodes = list(nodes)
            for node in nodes:
                self._pushed(tr, node)
            return push(tr, nodes, max_attempts)

        return watched

    def _pushed(self, tr: Any, node: StoredNode) -> None:
        found = self.nodes.get(node.result_id)
        if found is None:
            return
        plan, index = found
        marker = PUSHED + node.result_id.encode()
        if tr[marker].present():
            self.violate(f"node {index} of workflow {plan.id} ({plan.kind}) is released a second time")
        tr[marker] = b"1"
        self._ready(tr, plan, index, "released")

    def _ready(self, tr: Any, plan: Planned, index: int, what: str) -> None:
        """In ``tr`` (snapshot reads, own writes seen): its workflow RUNNING, its predecessors done."""
        raw = tr.snapshot[Keys(plan.id).header]
        status = Header.loads(bytes(raw)).status if raw.present() else None
        if status != RUNNING:
            self.violate(f"node {index} of workflow {plan.id} ({plan.kind}) is {what} while it is {status}")
        for before in plan.predecessors[index]:
            raw = tr.snapshot[results.record_key(plan.result_ids[before])]
            state = results.Record.loads(bytes(raw)).status if raw.present() else None
            if state not in _DONE[plan.on_failure]:
                self.violate(
                    f"node {index} of workflow {plan.id} ({plan.kind}, {plan.on_failure}) is {what}"
                    f" while its predecessor {before} is {state}"
                )

    def _watched_write(self, write: Callable[..., None]) -> Callable[..., None]:
        def watched(tr: Any, record: results.Record, previous: results.Record | None) -> None:
            found = self.nodes.get(record.id) if record.workflow is not None else None
            if found is not None and record.status == results.RUNNING:
                self._ready(tr, found[0], found[1], "started")
            write(tr, record, previous)

        return watched

    def check_predecessors(self, result_id: str, got: list[Any]) -> None:
        """A callback's view of its predecessors: the nodes it waits on, in order, as they ended."""
        plan, index = self.nodes[result_id]
        expected = [(before, plan.result_ids[before]) for before in plan.predecessors[index]]
        if [(r.index, r.result_id) for r in got] != expected:
            self.violate(
                f"node {index} of workflow {plan.id} read its predecessors as"
                f" {[(r.index, r.result_id) for r in got]}, not {expected}"
            )
            return
        for r in got:
            wrong = r.status not in _DONE[plan.on_failure] or (
                r.status == results.SUCCESSFUL and r.return_value not in self.tasks.tokens[r.result_id]
            )
            if wrong:
                self.violate(
                    f"node {index} of workflow {plan.id} ({plan.on_failure}) read predecessor {r.index}"
                    f" as {r.status} {r.return_value!r} (its runs returned {sorted(self.tasks.tokens[r.result_id])})"
                )

    # -- the enqueuer -------------------------------------------------------------------------------

    def enqueuer(self, name: str, rng: random.Random, operations: int) -> None:
        """Enqueues small workflows, a while apart; cancels some of them a while later."""
        for n in range(max(1, operations // 4)):
            plan, workflow = self._build(rng, n)
            for _attempt in range(3):  # an enqueue that failed may be called again: it resumes
                _handle, _doubt, error = self.actors._call(
                    name, f"enqueue workflow {plan.id} ({plan.kind}, {plan.on_failure})", workflow.enqueue
                )
                if error is None:
                    plan.returned = True
                    break
            if plan.returned and rng.random() < 0.25:
                self.actors.scheduler.sleep(rng.uniform(0.0, 3.0))
                plan.cancel = True
                self.actors._call(name, f"cancel workflow {plan.id}", partial(cancel_workflow, plan.id, ALIAS))
            self.actors.scheduler.sleep(rng.uniform(0.0, 1.0))

    def _build(self, rng: random.Random, n: int) -> tuple[Planned, Workflow]:
        member, callback = __getattr__("sim_member"), __getattr__("sim_callback")
        policy = rng.choice([FAIL, CONTINUE])
        workflow = Workflow(on_failure=policy, name=f"sim {n}")
        serial = iter(range(n * 100, n * 100 + 100))

        def step(task: Any) -> Any:
            return call(task, next(serial), rng.random() < 0.15)

        kind = rng.choice(["chain", "chord", "diamond"])
        if kind == "chain":
            workflow.add(chain(step(member), step(member), step(member)))
        elif kind == "chord":
            members = rng.randint(4, 8)
            kind = f"chord of {members}"
            workflow.add(chord(group(*(step(member) for _ in range(members))), step(callback)))
        else:
            first = workflow.add(step(member))
            sides = [workflow.add(step(member), after=[first]) for _ in range(2)]
            workflow.add(step(callback), after=sides)
        plan = Planned(
            workflow.id, kind, policy, [r.id for r in workflow.records], [list(p) for p in workflow.predecessors]
        )
        self.planned.append(plan)
        for index, result_id in enumerate(plan.result_ids):
            self.nodes[result_id] = (plan, index)
        return plan, workflow

    # -- the judge ----------------------------------------------------------------------------------

    def final(self) -> None:
        """After the last worker's drain: each workflow judged (see the module's docstring)."""
        db = self.actors.db
        for plan in self.planned:
            header = _header(db, plan.id)
            if header is not None and header.status in (FAILED, CANCELLED) and not header.swept:
                wf_stopping.sweep(db, plan.id)  # a sweep cut short: what cancel_workflow again does
            self._judge(plan)

    def _judge(self, plan: Planned) -> None:
        what = f"workflow {plan.id} ({plan.kind}, {plan.on_failure})"
        try:
            handle = get_workflow(plan.id, ALIAS)
        except Exception:  # noqa: BLE001 - WorkflowDoesNotExist: its enqueue stopped before its header
            handle = None
        if handle is None or handle.status == STORING:
            if plan.returned:
                self.violate(f"{what} was enqueued but is {'gone' if handle is None else STORING}")
            self._none_ran(plan, what)
            return
        states = {info.index: info.state for info in handle.nodes(limit=1000)}
        counted = {status: sum(1 for s in states.values() if s == status) for status in (SUCCESSFUL, FAILED, CANCELLED)}
        tallies = {SUCCESSFUL: handle.succeeded, FAILED: handle.failed, CANCELLED: handle.cancelled}
        if counted != tallies:
            self.violate(f"{what} tallies {tallies}, its nodes {counted}")
        if handle.status == RUNNING or any(s not in (SUCCESSFUL, FAILED, CANCELLED) for s in states.values()):
            self.violate(f"{what} is {handle.status} after the drain, its nodes {states}")
            return
        self._ended_as_its_nodes(plan, what, handle.status, states)
        for index, state in states.items():
            if state in RAN:
                before = {p: states.get(p) for p in plan.predecessors[index]}
                if any(s not in _DONE[plan.on_failure] for s in before.values()):
                    self.violate(f"node {index} of {what} ran ({state}), its predecessors {before}")

    def _ended_as_its_nodes(self, plan: Planned, what: str, status: str, states: dict[int, str]) -> None:
        ran = [s for s in states.values() if s in RAN]
        if status == SUCCESSFUL and (len(ran) != len(plan.result_ids) or FAILED in ran):
            self.violate(f"{what} is SUCCESSFUL, its nodes {states}")
        elif status == FAILED and FAILED not in ran:
            self.violate(f"{what} is FAILED, no node failed: {states}")
        elif status == FAILED and plan.on_failure == CONTINUE and len(ran) != len(plan.result_ids):
            self.violate(f"{what} is FAILED before every node ran: {states}")
        elif status == CANCELLED and not plan.cancel:
            self.violate(f"{what} is CANCELLED, and no one cancelled it")

    def _none_ran(self, plan: Planned, what: str) -> None:
        for index, result_id in enumerate(plan.result_ids):
            record = results.get(self.actors.db, result_id)
            if record is not None and record.status != results.READY:
                self.violate(f"node {index} of {what}, never started, is {record.status}")


#: The states a node's predecessors may be in when it is released or starts, by policy.
_DONE = {FAIL: (results.SUCCESSFUL,), CONTINUE: RAN}


def _header(db: Any, workflow_id: str) -> Header | None:
    from django_fdbqueue.tasks.workflows import headers

    return headers.get(db, workflow_id)
