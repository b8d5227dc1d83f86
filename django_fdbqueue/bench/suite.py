"""The benchmark run: which rows, in what order, on which targets, and what they mean together.

On each target (the app's queues, and the references asked for) the run measures:

* **one client**: ``push``, ``push+pop`` pairs (per strategy), and the one-client ``pop`` row of
  the next group; for the app's queues also ``claim+ack`` pairs (at-least-once consumption);
* **concurrent pops**: ``pop`` with each client count, as threads and as processes, per
  strategy, on a queue filled beforehand so that it never runs dry in the timed window. Every
  row that pops is checked for exactly-once delivery: no item id popped twice, and what was
  popped plus what remains equals what was there;
* **concurrent claims**: ``claim+ack`` the same way, in exact order and as spread claims
  (``spread=64``), the worker fleet's path. Every concurrent row records the CPU an operation
  cost the clients and, on a cluster of this machine, its servers, and how busy that kept the
  machine's cores;
* **queue depth**: the queue filled to a shallow depth (1,000) and to ``deep_size``
  (``fill`` rows: items/s and peak memory, which must stay flat because items go in batches),
  then ``peek`` and ``pop`` for the row's duration at each depth. Pops take at most half the
  queue before it is topped up again (untimed), so they measure that depth, not an emptying
  queue;
* **wake-up** (the app's queues only): a process blocked in ``pop(wait=...)`` on an empty queue,
  woken by another process's push: the latency from the push call to the popper holding the
  item (see :mod:`~django_fdbqueue.bench.workloads`);
* **tasks** (when the Django Tasks framework is installed): N tasks through the app's Tasks
  backend with 1, 4 and 16 worker threads; with every task enqueued first, 1 and 16 worker threads,
  with exact and with spread claims; and the same N through the framework's ImmediateBackend,
  which runs each inline: the zero-cost reference (see :mod:`~django_fdbqueue.bench.task_rows`);
  and, when django-tasks-db is installed (Django 5.2+), through django-tasks' database backend on
  SQLite in a process of its own: the reference of the project's Tasks goal (in the project's
  benchmarks, see :mod:`~django_fdbqueue.bench.references`).

The references: FoundationDB's own priority-queue recipe on the same store (``--recipe PATH``,
from the project's benchmarks), a private Redis and a raw SQLite file
(``--compare``, from the project's benchmarks beside the app, through the hook in
:mod:`~django_fdbqueue.bench.references`). Then it relates the rows
(:mod:`~django_fdbqueue.bench.results`); :mod:`~django_fdbqueue.bench.goals` reads the figures
the project has goals for off them.

This module is the run itself: the targets, the rows in the order of
:mod:`~django_fdbqueue.bench.plan`, the tasks rows, the run's metadata. How one row is measured is
in :mod:`~django_fdbqueue.bench.measure`.

The targets take turns row by row (our row with every strategy, then the same row on each
reference), so the two sides of a ratio are measured seconds apart, under the same background
load: on a busy machine the ratios are what to read, not the absolute rates.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import re
import uuid
from typing import Any

from .measure import RowMeasuring
from .plan import COMPARE_CHOICES, MODES, NO_RECIPE, BenchConfig, plan
from .progress import Progress
from .references import ReferenceMissing, recipe_target, run_tasks_db, start, tasks_db_missing
from .results import NO_STRATEGY, REFERENCES, BenchResult, Row, memory_warnings, relate
from .runner import BenchError, ProcessTeam
from .targets import OURS, Target
from .task_names import ENQUEUED_FIRST, TASKS_DB
from .task_rows import IMMEDIATE, TASK_WORKERS, TaskRun
from .workloads import claim_spread

__all__ = [
    "BenchConfig",
    "Row",
    "BenchResult",
    "Bench",
    "REFERENCES",
    "COMPARE_CHOICES",
    "MODES",
    "NO_RECIPE",
    "NO_STRATEGY",
]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


class Bench(RowMeasuring):
    """One run: ``Bench(config, db).run(progress)``; ``rows`` is the plan, measured in place."""

    def __init__(self, config: BenchConfig, db: Any) -> None:
        self.config = config
        self.db = db
        self.rows = plan(config)
        self.run_id = uuid.uuid4().hex[:8]
        self.failures: list[str] = []
        self.warnings: list[str] = []
        self.skipped: list[str] = []
        if config.tasks:
            from .task_rows import framework_missing

            missing = framework_missing()
            if missing:
                self.skipped.append(f"Tasks rows: {missing}")
                self.rows = [row for row in self.rows if row.group != "tasks"]
            else:
                self._drop_tasks_db_if_missing()
        if config.recipe is None:
            self.skipped.append(NO_RECIPE)
        self._tasks_framework: str | None = None
        self._tasks_db: dict[str, Any] | None = None
        self._block = 0
        self._rate_hint: dict[str, float] = {}
        self._scale_cap = max(2, 2 * (os.cpu_count() or 1))
        self._layout: dict[str, Any] | None = None
        self._latency: dict[str, Any] = {}

    # -- the run ---------------------------------------------------------------------------

    def run(self, progress: Progress) -> BenchResult:
        """Measure every planned row; servers, files, client processes and queues are gone after."""
        from .service_target import ServiceTarget
        from .store_info import describe

        ours = ServiceTarget.from_settings(self.db)
        engine = ours.metadata()["engine"]
        self._layout = describe(self.db, engine)
        self._store_is_cluster = engine == "foundationdb"
        self._probe_latency("start", progress)
        for message in self.skipped:
            progress.note(f"Skipped: {message}")
        with contextlib.ExitStack() as stack:
            targets: dict[str, Target] = {OURS: ours}
            if self.config.recipe is not None:
                targets["recipe"] = recipe_target(ours, self.config.recipe)
            for name in self.config.compare:
                targets[name] = start(name, stack, progress)
            references = {name: target.metadata() for name, target in targets.items() if name != OURS}
            team = stack.enter_context(ProcessTeam())
            self._measure_rows(targets, team, progress)
        # After the client processes and the Redis server are gone: the tasks rows run in this
        # process only.
        self._measure_tasks(progress)
        self._probe_latency("end", progress)
        shallow, deep = self.config.shallow_depth, self.config.deep_size
        relate(self.rows, shallow, deep)
        self.warnings += memory_warnings(self.rows, (OURS, *self.config.references), shallow, deep)
        return BenchResult(self.rows, self._meta(ours, references), self.failures, self.warnings, list(self.skipped))

    def _probe_latency(self, when: str, progress: Progress) -> None:
        """The store's commit and read-version latency now, with nothing else running (see ``latency``)."""
        from django_fdbqueue.connection import root_subspace

        from .latency import probe, probe_key

        measured = probe(self.db, probe_key(root_subspace(), self.run_id)).as_data()
        self._latency[when] = measured
        progress.note(
            f"Store latency at the {when}: commit {measured['commit_ms']:.3g} ms, read version "
            f"{measured['read_version_ms']:.3g} ms (medians of {measured['samples']})."
        )

    def _measure_rows(self, targets: dict[str, Target], team: ProcessTeam, progress: Progress) -> None:
        """Measure the planned queue rows in order; each queue is dropped after the last row using it."""
        rows = [row for row in self.rows if row.group != "tasks"]
        queues = [(row.target, *self._queue_of(row)) for row in rows]
        last_use = {queue: index for index, queue in enumerate(queues)}
        prepared: set[tuple[str, str, str | None]] = set()
        try:
            for index, row in enumerate(rows):
                name, queue, strategy = key = queues[index]
                target = targets[name]
                progress.start(row.label())
                if key not in prepared:
                    target.prepare(queue, strategy)
                    prepared.add(key)
                self._measure(target, row, queue, strategy, team, progress)
                progress.done(row.summary())
                if last_use[key] == index:
                    prepared.discard(key)
                    target.drop(queue, strategy)
        finally:
            for name, queue, strategy in prepared:
                with contextlib.suppress(Exception):
                    targets[name].drop(queue, strategy)

    def _queue_of(self, row: Row) -> tuple[str, str | None]:
        """The queue a row works on, and the strategy whose layout it has."""
        strategy = None if row.strategy == NO_STRATEGY else row.strategy
        if row.operation == "claim+ack":
            # Exact and spread claims work on plain queues; each series has its own.
            return f"fdbqueue-bench.{self.run_id}.claims-{_safe(row.strategy)}", None
        if row.depth is not None:
            purpose = f"depth-{row.depth}"
        elif row.operation == "push":
            purpose = "push"
        elif row.operation == "push+pop":
            purpose = f"pairs-{_safe(row.strategy)}"
        elif row.operation == "wake":
            purpose = "wake"
        else:
            purpose = f"pops-{_safe(row.strategy)}"
        return f"fdbqueue-bench.{self.run_id}.{purpose}", strategy

    def _measure_tasks(self, progress: Progress) -> None:
        """The tasks rows, in plan order, with the bench's own task backends (see ``task_rows``)."""
        rows = [row for row in self.rows if row.group == "tasks"]
        if not rows:
            return
        from .task_rows import bench_backends, framework_description

        self._tasks_framework = framework_description()
        with bench_backends(self.run_id) as tasks:
            for row in rows:
                progress.start(row.label())
                run = self._task_run(tasks, row, progress)
                if run is None:
                    continue  # the database backend's row, left out (see _run_tasks_db)
                row.ops, row.seconds, row.ops_per_s = run.tasks, round(run.seconds, 6), run.tasks_per_s
                row.peak_mib = run.peak_mib
                if run.retries is not None:
                    row.retries_by_code = dict(run.retries)
                    row.retries = sum(run.retries.values())
                    row.retries_per_op = row.retries / row.ops if row.ops else 0.0
                row.exactly_once = not run.problems
                if run.problems:
                    self.failures.append(f"{row.label()}: " + "; ".join(run.problems) + ".")
                progress.done(row.summary())

    def _task_run(self, tasks: Any, row: Row, progress: Progress) -> TaskRun | None:
        """Measure one tasks row on its target; the row's notes get its rounds or its enqueues/s."""
        run: TaskRun | None
        if row.target == IMMEDIATE:
            run = tasks.run_immediate(self.config.tasks, self.config.duration)
            row.notes["rounds"] = run.rounds
            return run
        if row.target == TASKS_DB:
            run = self._run_tasks_db(row, progress)
        else:
            run = tasks.run_workers(
                self.config.tasks,
                row.clients,
                progress.detail,
                enqueue_first=row.mode == ENQUEUED_FIRST,
                spread=claim_spread(row),
            )
        if run is not None:
            row.notes["enqueue_per_s"] = round(run.enqueue_per_s, 2)
            if run.run_per_s is not None:
                row.notes["run_per_s"] = round(run.run_per_s, 2)
        return run

    def _drop_tasks_db_if_missing(self) -> None:
        """Leave out the database backend's row, with a line saying why, where it cannot run here."""
        why = tasks_db_missing()
        if why:
            self.skipped.append(why)
            self.rows = [row for row in self.rows if row.target != TASKS_DB]

    def _run_tasks_db(self, row: Row, progress: Progress) -> TaskRun | None:
        """The database backend's row; None, and the row left out, when it cannot run or fails.

        The reference is optional, so it never fails the bench: a backend its process cannot
        import is a "Skipped" line, a process that fails or falls silent is a warning.
        """
        try:
            run, self._tasks_db = run_tasks_db(self.config.tasks, progress.detail)
            return run
        except ReferenceMissing as missing:
            self.skipped.append(str(missing))
            progress.note(f"Skipped: {missing}")
        except BenchError as error:
            self.warnings.append(f"{row.label()}: not measured, the reference failed: {error}")
            progress.note(f"Warning: {self.warnings[-1]}")
        self.rows.remove(row)
        return None

    def _meta(self, ours: Target, references: dict[str, dict[str, Any]]) -> dict[str, Any]:
        import django

        import django_fdbqueue

        store = ours.metadata()
        meta: dict[str, Any] = {
            "tool": "manage.py fdbqueue bench",
            "version": django_fdbqueue.__version__,
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "engine": store.get("engine"),
            "store": store,
            "cluster": self._layout,
            "store_latency": self._latency or None,
            "python": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            "django": django.get_version(),
            "platform": platform.platform(terse=True),
            "cpu_count": os.cpu_count(),
            "strategies": list(self.config.strategies),
            "duration_s": self.config.duration,
            "clients": list(self.config.clients),
            "modes": list(self.config.modes),
            "deep_size": self.config.deep_size,
            "shallow_size": self.config.shallow_depth,
            "quick": self.config.quick,
            "compare": list(self.config.compare),
            "references": references,
            "tasks": self._tasks_meta(),
            "skipped": list(self.skipped),
            "exactly_once_passed": not self.failures,
        }
        return meta

    def _tasks_meta(self) -> dict[str, Any] | None:
        """How the tasks rows ran; None when they did not (left out, or the framework is missing)."""
        if not any(row.group == "tasks" for row in self.rows):
            return None
        from .task_rows import immediate_backend_path, queue_prefix

        return {
            "per_row": self.config.tasks,
            "workers": list(TASK_WORKERS),
            "framework": self._tasks_framework,
            "backend": "django_fdbqueue.tasks.FDBQueueBackend",
            "reference": immediate_backend_path(),
            "queue_prefix": queue_prefix(self.run_id),
            "database_backend": self._tasks_db,
        }
