"""The Tasks worker: an enqueuer enqueues Django tasks, workers run them, some die mid-way.

Each worker is the ``Worker`` of ``manage.py fdbqueue worker --tasks`` driven one item at a time
by its actor (its slot's claim, then its handling and settling; no heartbeat thread): the claim
marks the task RUNNING (``TaskRunner.claimed``), the task runs (sleeping a while, now and then
past its lease), and its result is stored with the ack (``AckWith``). Now and then a worker dies
between its claim and the task's step, and the lease brings the item back. What the Tasks
backend promises (delivery at least once, the result recorded by the first run to finish):

* **every enqueued task runs to a result**: at the end (a last worker drains the queue, faults
  off) every result record of the backend is SUCCESSFUL, its value one that a run of that task
  returned, and every enqueue that returned has its record;
* **its result is recorded once**: no write ever replaces a finished record (checked on every
  write of a result record, committed or not: the code that would do it is the defect).

The same workers run the workflows of ``actors_workflows`` (its enqueuer spawned here); their
members' records are judged there.
"""

from __future__ import annotations

import collections
import contextlib
import random
import string
import time
from functools import partial
from typing import Any, Iterator

from django_fdbqueue import service
from django_fdbqueue.tasks import backend as tasks_backend
from django_fdbqueue.tasks import results
from django_fdbqueue.tasks import runner as tasks_runner
from django_fdbqueue.tasks.compat import Task, task_backends
from django_fdbqueue.tasks.runner import TaskRunner
from django_fdbqueue.worker import Worker
from django_fdbqueue.worker.ack_with import ack_with
from django_fdbqueue.worker.backoff import Backoff
from django_fdbqueue.worker.settling import Settler
from django_fdbqueue.worker.slots import ClaimOptions, Slot
from django_fdbqueue.worker.state import Held, Target, WorkerState

from .actors_workflows import Workflows
from .scheduler import Scheduler
from .workload import Actors

ALIAS = "fdbqueue-simulation"
#: Result ids in a run are drawn from its seed (the backend's own come from the OS).
ID_CHARACTERS = string.ascii_letters + string.digits
TASK_QUEUE = "simtasks.default"
LEASE_SECONDS = 2.0
QUEUES: dict[str, dict[str, Any]] = {TASK_QUEUE: {"kind": "priority"}}
_BACKEND = {
    "BACKEND": "django_fdbqueue.tasks.FDBQueueBackend",
    "QUEUES": [],
    "OPTIONS": {"QUEUE_PREFIX": "simtasks.", "LEASE": LEASE_SECONDS, "RESULT_RETENTION": None},
}
#: The run in progress, for the task (which runs inside the worker's code).
_RUN: "Tasks | None" = None


def _sim_task(context: Any, n: int) -> str:
    """The simulated task: counts its runs, takes a while (now and then past its lease)."""
    run = _RUN
    assert run is not None, "the simulation's task runs inside a simulation only"
    result_id = context.task_result.id
    run.runs[result_id] += 1
    token = f"{n}#{run.runs[result_id]}"
    run.tokens[result_id].add(token)
    if run.actors.scheduler.current() is not None:
        time.sleep(random.choice([0.0, 0.1, 0.5, 1.0, 3.0]))  # virtual; 3 s outlives the lease
    return token


_sim_task.__name__ = _sim_task.__qualname__ = "sim_task"


def __getattr__(name: str) -> Any:
    """``sim_task``: the Task (made when asked for, since it needs the backend the run declares)."""
    if name == "sim_task":
        return Task(func=_sim_task, backend=ALIAS, takes_context=True)
    raise AttributeError(name)


def _enqueued_id(task: Any, n: int) -> str:
    """Enqueue; the result's id (what the trace shows: the whole result names a memory address)."""
    return str(task.enqueue(n).id)


class _VirtualStop:
    """A worker's stop event whose waits (its back-off after a failed claim) are virtual."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def is_set(self) -> bool:
        return False

    def wait(self, seconds: float | None = None) -> bool:
        self.scheduler.sleep(seconds or 0.0)
        return False


class Tasks:
    """The enqueuer, the workers and the oracle of their tasks (see the module's docstring)."""

    def __init__(self, actors: Actors) -> None:
        self.actors = actors
        self.runs: collections.Counter[str] = collections.Counter()
        self.tokens: dict[str, set[str]] = collections.defaultdict(set)
        self.enqueued: list[str] = []  # result ids of enqueues that returned
        self.workflows = Workflows(self)  # workflows of these tasks, run by the same workers

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The backend declared, its database the run's, every result write watched."""
        global _RUN
        settings = task_backends.settings
        ids = random.Random(f"{self.actors.seed}/result-ids")
        replaced = [
            (results, "new_id", lambda: "".join(ids.choices(ID_CHARACTERS, k=results.ID_LENGTH))),
            (tasks_backend, "get_database", lambda: self.actors.db),
            (tasks_runner, "close_old_connections", lambda: None),  # no Django connection here
            *self.workflows.replaced(self._watched(results.write)),
        ]
        saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in replaced]
        for owner, attr, value in replaced:
            setattr(owner, attr, value)
        settings[ALIAS] = _BACKEND
        _RUN = self
        self.workflows.start()
        try:
            yield
        finally:
            _RUN = None
            self.workflows.stop()
            for owner, attr, value in saved:
                setattr(owner, attr, value)
            settings.pop(ALIAS, None)

    def _watched(self, write: Any) -> Any:
        def watched(tr: Any, record: results.Record, previous: results.Record | None) -> None:
            if previous is not None and previous.finished and record.backend == ALIAS:
                self.actors.history.violate(
                    "task-result", f"task {record.id}'s {previous.status} result is being replaced by {record.status}"
                )
            write(tr, record, previous)

        return watched

    def spawn(self, shape: Any, spawn: Any) -> None:
        if shape.task_workers:
            spawn("task-enqueuer", 1, self.enqueuer)
        spawn("task-worker", shape.task_workers, self.worker)
        spawn("wf-enqueuer", shape.workflows, self.workflows.enqueuer)

    def enqueuer(self, name: str, rng: random.Random, operations: int) -> None:
        task = __getattr__("sim_task")
        for n in range(max(1, operations // 4)):
            enqueue = partial(_enqueued_id, task, n)
            result_id, _doubt, _error = self.actors._call(name, f"enqueue task {n}", enqueue)
            if result_id is not None:
                self.enqueued.append(result_id)
            self.actors.scheduler.sleep(rng.uniform(0.0, 1.0))

    def worker(self, name: str, rng: random.Random, operations: int) -> None:
        """A worker's slot, item by item; it dies between a claim and the task's step now and then."""
        runner = TaskRunner(task_backends[ALIAS], worker_id=name)  # type: ignore[arg-type]
        slot = self._slot(runner)
        backoff = Backoff(initial=0.1, maximum=2.0)
        for _ in range(max(1, operations // 3)):
            self.actors.scheduler.note(f"{name} claims a task")
            claimed, lease = slot.claim_once(backoff)
            if not claimed or lease is None:
                continue
            if rng.random() < 0.1:
                self.actors.scheduler.note(f"{name} dies between its claim and the task's step")
                return
            self.actors.scheduler.note(f"{name} runs {lease.item.value}")
            slot.work_on(Held(lease, time.monotonic(), LEASE_SECONDS))

    def _slot(self, runner: TaskRunner) -> Slot:
        """One slot of a worker (as ``Worker`` makes them), driven here claim by claim, its
        back-off waits virtual."""
        defaults = Worker(self.actors.db, TASK_QUEUE, runner.handle, on_claim=runner.claimed)
        target = Target(self.actors.db, TASK_QUEUE, LEASE_SECONDS)
        state = WorkerState(1)
        state.stopping = _VirtualStop(self.actors.scheduler)  # type: ignore[assignment]
        settler = Settler(target, state, base_backoff=defaults.base_backoff, max_backoff=defaults.max_backoff)
        options = ClaimOptions(end="max", poll_wait=defaults.poll_wait, spread=None, on_claim=runner.claimed)
        return Slot(0, target, state, settler, runner.handle, options)

    def final(self, oracle: Any) -> None:
        """A last worker drains the queue (faults off); then every task's result is judged."""
        db, history = self.actors.db, self.actors.history
        runner = TaskRunner(task_backends[ALIAS], worker_id="the last worker")  # type: ignore[arg-type]
        while (lease := service.claim(db, TASK_QUEUE, lease=60.0, end="max", step=runner.claimed)) is not None:
            writes = runner.handle(lease.item, lease.step_result)  # type: ignore[attr-defined]
            if writes is None:
                service.ack(db, lease.receipt)
            else:
                ack_with(db, lease.receipt, TASK_QUEUE, writes)
        oracle._recount(TASK_QUEUE)
        self.workflows.final()
        found = {record.id: record for status in results.STATUSES for record in self._records(status)}
        for result_id in self.enqueued:
            if result_id not in found:
                history.violate("task-result", f"task {result_id} was enqueued but has no result record")
        for record in found.values():
            if _killed_inside(record) or record.workflow is not None:  # members: judged by ``workflows``
                continue
            if record.status != results.SUCCESSFUL or record.return_value not in self.tokens[record.id]:
                history.violate(
                    "task-result",
                    f"task {record.id} ended {record.status} with {record.return_value!r}"
                    f" after {self.runs[record.id]} run(s) ({sorted(self.tokens[record.id])})",
                )

    def _records(self, status: str) -> list[results.Record]:
        records, _more = results.page(self.actors.db, ALIAS, "default", status, None, 1000)
        return records


def _killed_inside(record: results.Record) -> bool:
    """Did the simulation stop a worker inside the task? The runner records whatever a task raises
    as its failure (as Django's backends do), a stop included, where a killed process records
    nothing: such a record says nothing about the backend."""
    return record.status == results.FAILED and any(
        error.get("exception_class_path", "").endswith(".Killed") for error in record.errors
    )
