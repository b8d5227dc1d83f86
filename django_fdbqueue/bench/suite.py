"""The benchmark run: which rows, in what order, on which targets, and what they mean together.

On each target (the app's queues, and the references asked for) the run measures:

* **one client**: ``push``, ``push+pop`` pairs (per strategy), and the one-client ``pop`` row of
  the next group; for the app's queues also ``claim+ack`` pairs (at-least-once consumption);
* **concurrent pops**: ``pop`` with each client count, as threads and as processes, per
  strategy, on a queue filled beforehand so that it never runs dry in the timed window. Every
  row that pops is checked for exactly-once delivery: no item id popped twice, and what was
  popped plus what remains equals what was there;
* **queue depth**: the queue filled to a shallow depth (1,000) and to ``deep_size``
  (``fill`` rows: items/s and peak memory, which must stay flat because items go in batches),
  then ``peek`` and ``pop`` for the row's duration at each depth. Pops take at most half the
  queue before it is topped up again (untimed), so they measure that depth, not an emptying
  queue;
* **wake-up** (the app's queues only): a process blocked in ``pop(wait=...)`` on an empty queue,
  woken by another process's push: the latency from the push call to the popper holding the
  item (see :mod:`~django_fdbqueue.bench.workloads`);
* **tasks** (when the Django Tasks framework is installed): N tasks through the app's Tasks
  backend with 1 and 4 worker threads, and the same N through the framework's ImmediateBackend,
  which runs each inline: the zero-cost reference (see :mod:`~django_fdbqueue.bench.task_rows`).

The references: FoundationDB's own priority-queue recipe on the same store (``--recipe PATH``,
see :mod:`~django_fdbqueue.bench.recipe_ref`), a private Redis and a raw SQLite file
(``--compare``). Then it relates the rows: our rate divided by the reference's for the same row
(``vs_recipe``, ``vs_redis``, ``vs_sqlite``), each concurrent row's rate divided by the same
series' one-client rate (``vs_one_client``), each deep row's rate divided by its shallow one
(``vs_shallow``), and claim+ack pairs divided by one client's plain pops (``vs_pop``). A tasks row
of ours is divided by the ImmediateBackend's (``vs_immediate``), and the 4-worker row by the
1-worker one (``vs_one_client``). :mod:`~django_fdbqueue.bench.goals` reads the figures the
project has goals for off these rows.

The targets take turns row by row (our row with every strategy, then the same row on each
reference), so the two sides of a ratio are measured seconds apart, under the same background
load: on a busy machine the ratios are what to read, not the absolute rates.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import platform
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterator

from .progress import Progress
from .recipe_source import RecipeSource
from .runner import Measurement, ProcessTeam, run_threads
from .stats import peak_memory_mib, reset_peak_memory
from .strategies import registered
from .targets import OURS, Target
from .task_rows import IMMEDIATE, TASK_WORKERS
from .workloads import Work, batches

__all__ = [
    "BenchConfig",
    "Row",
    "BenchResult",
    "Bench",
    "REFERENCES",
    "COMPARE_CHOICES",
    "MODES",
    "NO_STRATEGY",
]

#: Every reference, in the order the report lists them; ``vs_<name>`` of a row relates it to one.
REFERENCES = ("recipe", "redis", "sqlite")
#: The references ``--compare`` starts; the recipe comes with ``--recipe PATH`` instead.
COMPARE_CHOICES = ("redis", "sqlite")
MODES = ("threads", "processes")
#: Rows on a queue filled beforehand; one that runs dry is measured again on a fuller queue, up to
#: MEASURE_ATTEMPTS windows in all.
PREFILLED = ("pop", "claim+ack")
MEASURE_ATTEMPTS = 3
#: The shortest window of the wake-up row: it pushes one item per WAKE_INTERVAL only.
WAKE_MIN_SECONDS = 1.0
#: The strategy of the service's default pop, which claim+ack pairs are compared with.
PLAIN_POP = "plain"
#: Why the recipe rows are missing from a run without ``--recipe``.
NO_RECIPE = (
    "FoundationDB recipe rows: no recipe file given. --recipe PATH runs FoundationDB's own "
    "priority-queue recipe (its Python code, or the documentation page that holds it) beside the "
    "service on the same store, in the same run."
)
#: The strategy column of rows that do not depend on a pop strategy (and of every reference row).
NO_STRATEGY = "-"

DEFAULT_DURATION = 3.0
DEFAULT_CLIENTS = (1, 2, 4, 8, 16)
DEFAULT_DEEP_SIZE = 1_000_000
QUICK_DURATION = 0.3
QUICK_CLIENTS = (1, 2)
QUICK_DEEP_SIZE = 2_000
#: Tasks enqueued in each tasks row (0 leaves the tasks rows out).
DEFAULT_TASKS = 2_000
QUICK_TASKS = 200

#: The shallow depth the deep one is compared with (smaller when deep_size is tiny).
SHALLOW_DEPTH = 1_000
#: Queue items per expected pop in the timed window, so concurrent pops do not run dry.
# Three times the fastest rate seen so far: a row measured while the machine was busier than
# during the pop rows must not leave them an empty queue (items are cheap to fill in batches).
PREFILL_SAFETY = 3.0
MAX_PREFILL = 2_000_000
#: Fill memory growth from the shallow to the deep fill that is reported as not flat.
FLAT_MEMORY_MIB = 64.0


@dataclass(frozen=True)
class BenchConfig:
    """What to measure; build it with :meth:`build`, which fills in the defaults."""

    duration: float = DEFAULT_DURATION
    clients: tuple[int, ...] = DEFAULT_CLIENTS
    strategies: tuple[str, ...] = ("plain",)
    deep_size: int = DEFAULT_DEEP_SIZE
    compare: tuple[str, ...] = ()
    modes: tuple[str, ...] = MODES
    quick: bool = False
    tasks: int = DEFAULT_TASKS
    recipe: RecipeSource | None = None

    @classmethod
    def build(
        cls,
        *,
        duration: float | None = None,
        clients: tuple[int, ...] | list[int] | None = None,
        strategies: tuple[str, ...] | list[str] | None = None,
        deep_size: int | None = None,
        compare: tuple[str, ...] | list[str] = (),
        quick: bool = False,
        tasks: int | None = None,
        recipe: RecipeSource | None = None,
    ) -> "BenchConfig":
        """Defaults for what is not given (tiny ones with ``quick``); strategies are checked.

        The client counts always include 1: every concurrent row is related to it.
        """
        if "recipe" in compare:
            raise ValueError("The recipe is not started by --compare: give its file with --recipe PATH.")
        unknown = [name for name in compare if name not in COMPARE_CHOICES]
        if unknown:
            raise ValueError(f"Unknown reference {unknown[0]!r}; choose from {', '.join(COMPARE_CHOICES)}.")
        counts = set(clients or (QUICK_CLIENTS if quick else DEFAULT_CLIENTS))
        if any(count < 1 for count in counts):
            raise ValueError("Client counts must be at least 1.")
        if tasks is not None and tasks < 0:
            raise ValueError("The number of tasks per row cannot be negative.")
        return cls(
            duration=duration if duration is not None else (QUICK_DURATION if quick else DEFAULT_DURATION),
            clients=tuple(sorted(counts | {1})),
            strategies=registered(strategies),
            deep_size=(
                deep_size if deep_size is not None else (QUICK_DEEP_SIZE if quick else DEFAULT_DEEP_SIZE)
            ),
            compare=tuple(name for name in COMPARE_CHOICES if name in compare),
            quick=quick,
            tasks=tasks if tasks is not None else (QUICK_TASKS if quick else DEFAULT_TASKS),
            recipe=recipe,
        )

    @property
    def references(self) -> tuple[str, ...]:
        """Every reference target of the run, in report order."""
        return (("recipe",) if self.recipe is not None else ()) + self.compare

    @property
    def shallow_depth(self) -> int:
        return max(1, min(SHALLOW_DEPTH, self.deep_size // 10))

    @property
    def depths(self) -> tuple[int, ...]:
        return tuple(sorted({self.shallow_depth, self.deep_size}))


@dataclass
class Row:
    """One measured line of the report. ``depth`` is set on the queue-depth rows only."""

    target: str
    operation: str
    clients: int
    mode: str
    strategy: str
    depth: int | None = None
    ops: int = 0
    seconds: float = 0.0
    ops_per_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    retries: int | None = None
    retries_per_op: float | None = None
    retries_by_code: dict[int, int] | None = None
    peak_mib: float | None = None
    exactly_once: bool | None = None
    ran_dry: bool = False
    vs_recipe: float | None = None
    vs_redis: float | None = None
    vs_sqlite: float | None = None
    vs_pop: float | None = None
    vs_one_client: float | None = None
    vs_shallow: float | None = None
    vs_immediate: float | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        """Which part of the report the row belongs to."""
        if self.operation == "tasks":
            return "tasks"
        if self.operation == "wake":
            return "wake"
        if self.depth is not None:
            return "depth"
        if self.operation == "pop":
            return "concurrent"
        return "one client"

    def label(self) -> str:
        text = f"{self.target} {self.operation}"
        if self.operation == "tasks":
            if self.target == IMMEDIATE:
                return text + ", run inline by enqueue"
            return text + f", {self.clients} worker thread{'' if self.clients == 1 else 's'}"
        if self.operation == "wake":
            return f"{self.target} pop woken by a push, popper and pusher processes"
        if self.depth is not None:
            text += f" at {self.depth:,} queued"
        elif self.mode == "threads":
            text += f", {self.clients} thread{'' if self.clients == 1 else 's'}"
        else:
            text += f", {self.clients} process{'' if self.clients == 1 else 'es'}"
        if self.strategy != NO_STRATEGY:
            text += f", {self.strategy}"
        return text

    def summary(self) -> str:
        unit = "tasks/s" if self.operation == "tasks" else "ops/s"
        text = f"{self.label()}: {self.ops_per_s:,.0f} {unit}"
        if self.p50_ms is not None:
            text += f", p50 {self.p50_ms:.3g} ms, p99 {self.p99_ms:.3g} ms"
        if self.exactly_once is False:
            text += ", EXACTLY-ONCE CHECK FAILED"
        if self.ran_dry:
            text += ", ran dry"
        return text


@dataclass
class BenchResult:
    rows: list[Row]
    meta: dict[str, Any]
    failures: list[str]
    warnings: list[str]
    #: Rows not measured because something they need is not installed, and why.
    skipped: list[str] = field(default_factory=list)

    @property
    def exactly_once_passed(self) -> bool:
        return not self.failures

    def headline(self) -> list[str]:
        """The figures to quote: one client's push+pop pairs per second against each reference."""
        pairs = {row.target: row for row in self.rows if row.operation == "push+pop" and row.target != OURS}
        lines = []
        for row in self.rows:
            if row.target == OURS and row.operation == "push+pop":
                text = f"One client push+pop pairs/s ({row.strategy}): {row.ops_per_s:,.0f}"
                against = [
                    f"{getattr(row, f'vs_{name}'):.3g}x {name} ({pairs[name].ops_per_s:,.0f})"
                    for name in REFERENCES
                    if name in pairs and getattr(row, f"vs_{name}") is not None
                ]
                if against:
                    text += " = " + ", ".join(against)
                lines.append(text)
        immediate = next((r for r in self.rows if r.group == "tasks" and r.target == IMMEDIATE), None)
        for row in self.rows:
            if row.group == "tasks" and row.target == OURS:
                threads = f"{row.clients} worker thread{'' if row.clients == 1 else 's'}"
                text = f"Tasks/s with {threads}: {row.ops_per_s:,.0f}"
                if row.vs_immediate is not None and immediate is not None:
                    text += f" = {row.vs_immediate:.3g}x immediate ({immediate.ops_per_s:,.0f})"
                lines.append(text)
        return lines


def plan(config: BenchConfig) -> list[Row]:
    """Every row the run will measure, in the order it measures them (unmeasured).

    Each kind of row is measured on every target in turn before the next kind: ours with each
    strategy, then each reference.
    """

    def on_every_target(
        operation: str, clients: int, mode: str, *, by_strategy: bool = True, depth: int | None = None
    ) -> list[Row]:
        rows = []
        for target in (OURS, *config.references):
            strategies = config.strategies if target == OURS and by_strategy else (NO_STRATEGY,)
            rows.extend(Row(target, operation, clients, mode, strategy, depth=depth) for strategy in strategies)
        return rows

    rows = on_every_target("push", 1, "threads", by_strategy=False)
    rows += on_every_target("push+pop", 1, "threads")
    rows.append(Row(OURS, "claim+ack", 1, "threads", NO_STRATEGY))
    for mode in config.modes:
        for clients in config.clients:
            rows += on_every_target("pop", clients, mode)
    rows.append(Row(OURS, "wake", 2, "processes", NO_STRATEGY))
    for depth in config.depths:
        for operation in ("fill", "peek", "pop"):
            rows += on_every_target(operation, 1, "threads", by_strategy=False, depth=depth)
    if config.tasks:
        # The reference has no workers: each enqueue runs its task, on the bench's one thread.
        rows += [Row(OURS, "tasks", workers, "threads", NO_STRATEGY) for workers in TASK_WORKERS]
        rows.append(Row(IMMEDIATE, "tasks", 1, "threads", NO_STRATEGY))
    return rows


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def _ratio(row: Row, other: Row | None) -> float | None:
    if other is None or other.ops_per_s <= 0 or row.ops_per_s <= 0:
        return None
    return row.ops_per_s / other.ops_per_s


class Bench:
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
        if config.recipe is None:
            self.skipped.append(NO_RECIPE)
        self._tasks_framework: str | None = None
        self._block = 0
        self._rate_hint: dict[str, float] = {}
        self._scale_cap = max(2, 2 * (os.cpu_count() or 1))
        self._sqlite_location: str | None = None
        self._layout: dict[str, Any] | None = None

    # -- the run ---------------------------------------------------------------------------

    def run(self, progress: Progress) -> BenchResult:
        """Measure every planned row; servers, files, client processes and queues are gone after."""
        from .service_target import ServiceTarget
        from .store_info import describe

        ours = ServiceTarget.from_settings(self.db)
        self._layout = describe(self.db, ours.metadata()["engine"])
        for message in self.skipped:
            progress.note(f"Skipped: {message}")
        with contextlib.ExitStack() as stack:
            targets: dict[str, Target] = {OURS: ours}
            if self.config.recipe is not None:
                from .recipe_ref import RecipeTarget

                targets["recipe"] = RecipeTarget.beside(ours, self.config.recipe)
            if "redis" in self.config.compare:
                targets["redis"] = self._start_redis(stack, progress)
            if "sqlite" in self.config.compare:
                targets["sqlite"] = self._open_sqlite(stack)
            references = {name: target.metadata() for name, target in targets.items() if name != OURS}
            team = stack.enter_context(ProcessTeam())
            self._measure_rows(targets, team, progress)
        # After the client processes and the Redis server are gone: the tasks rows run in this
        # process only.
        self._measure_tasks(progress)
        self._relate()
        self._check_memory()
        return BenchResult(
            self.rows, self._meta(ours, references), self.failures, self.warnings, list(self.skipped)
        )

    def _start_redis(self, stack: contextlib.ExitStack, progress: Progress) -> Target:
        from .redis_ref import RedisServer, RedisTarget, check_available

        server = stack.enter_context(RedisServer(check_available()))
        progress.note(f"Started redis-server {server.version} on 127.0.0.1:{server.port} (no persistence).")
        target = RedisTarget(server.port, server)
        stack.callback(target.close)
        return target

    def _open_sqlite(self, stack: contextlib.ExitStack) -> Target:
        from .sqlite_ref import SqliteTarget

        directory = stack.enter_context(self._reference_directory())
        target = SqliteTarget(os.path.join(directory, "reference.sqlite3"))
        stack.callback(target.close)
        return target

    @contextlib.contextmanager
    def _reference_directory(self) -> Iterator[str]:
        """A directory for the SQLite reference, beside the embedded store: the same disk."""
        from django_fdbqueue.conf import get_settings

        settings = get_settings()
        parent = None
        if settings.engine == "embedded":
            parent = os.path.dirname(os.path.abspath(settings.path))
        try:
            directory = tempfile.mkdtemp(prefix="fdbqueue-bench-", dir=parent)
            self._sqlite_location = (
                "beside the embedded store (same disk)" if parent else "temporary directory"
            )
        except OSError:
            directory = tempfile.mkdtemp(prefix="fdbqueue-bench-")
            self._sqlite_location = "temporary directory (the store's directory is not writable)"
        try:
            yield directory
        finally:
            shutil.rmtree(directory, ignore_errors=True)

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
        if row.depth is not None:
            purpose = f"depth-{row.depth}"
        elif row.operation == "push":
            purpose = "push"
        elif row.operation == "push+pop":
            purpose = f"pairs-{_safe(row.strategy)}"
        elif row.operation in ("claim+ack", "wake"):
            purpose = "claims" if row.operation == "claim+ack" else "wake"
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
                if row.target == IMMEDIATE:
                    run = tasks.run_immediate(self.config.tasks, self.config.duration)
                    row.notes["rounds"] = run.rounds
                else:
                    run = tasks.run_workers(self.config.tasks, row.clients, progress.detail)
                    row.notes["enqueue_per_s"] = round(run.enqueue_per_s, 2)
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

    def _next_block(self) -> int:
        """A fresh range of value numbers, so no two rows push the same n."""
        self._block += 1
        return self._block * 10**15

    # -- one row ---------------------------------------------------------------------------

    def _measure(
        self, target: Target, row: Row, queue: str, strategy: str | None, team: ProcessTeam, progress: Progress
    ) -> None:
        """Measure ``row`` on ``target`` and fill in its figures and its exactly-once verdict."""
        if row.operation == "fill":
            self._measure_fill(target, row, queue, strategy, progress)
            return
        if row.operation == "pop" and row.depth is not None:
            self._measure_pops_at_depth(target, row, queue, strategy, progress)
            return
        duration = self.config.duration
        if row.operation == "wake":
            duration = max(duration, WAKE_MIN_SECONDS)  # enough pushes for percentiles, even in --quick
        prefilled = row.operation in PREFILLED
        held = True
        at_least = 0
        for attempt in range(MEASURE_ATTEMPTS if prefilled else 1):
            if prefilled:
                self._top_up(target, row, queue, strategy, progress, at_least)
            held = self._measure_once(target, row, queue, strategy, team, duration, progress) and held
            self._learn_rate(row)  # from a dry window too: its rate is real, it just ended early
            if not (prefilled and row.ran_dry):
                break
            if attempt == 0:
                # The prefill estimate came from slower rows (or a busier moment): measure again on
                # a queue filled for the rate just seen, rather than report a cut-short window.
                row.notes["measured_again"] = "the queue ran dry in the first window"
            # A rate learned from a window of a few items can be low (thread start-up weighs in
            # it): each further window starts with at least twice what the last one had.
            at_least = 2 * int(row.notes.get("queued_at_start", 0))
        if row.operation != "peek":
            row.exactly_once = held
        if row.ran_dry and row.depth is None:
            self.warnings.append(
                f"{row.label()}: the queue ran dry during the timed window; its rate covers less than "
                "a full window."
            )

    def _measure_once(
        self, target: Target, row: Row, queue: str, strategy: str | None, team: ProcessTeam,
        duration: float, progress: Progress,
    ) -> bool:
        """One timed window of ``row``: its figures recorded, and whether exactly-once held in it."""
        before = target.remaining(queue, strategy)
        work = Work(row.operation, queue, strategy, first_n=self._next_block())
        progress.detail("running")
        if row.mode == "processes":
            measurement = team.run(target.spec(), work, row.clients, duration)
        else:
            measurement = run_threads(target, work, row.clients, duration)
        self._record(row, measurement)
        if row.operation == "peek":
            return True
        pushed = row.ops if row.operation in ("push", "push+pop") else measurement.pushed
        after = target.remaining(queue, strategy)
        return self._check_exactly_once(row, measurement.popped, before, after, pushed)

    def _measure_pops_at_depth(
        self, target: Target, row: Row, queue: str, strategy: str | None, progress: Progress
    ) -> None:
        """Pop for the row's duration without letting the queue fall below half its depth.

        Each round pops at most half the queue; between rounds it is topped up again, untimed.
        """
        assert row.depth is not None
        per_round = max(1, row.depth // 2)
        parts: list[Measurement] = []
        before = after = 0
        spent = 0.0
        while spent < self.config.duration:
            have = target.remaining(queue, strategy)
            if have < row.depth:
                self._fill(target, queue, strategy, row.depth - have, progress)
            before += target.remaining(queue, strategy)
            work = Work("pop", queue, strategy, max_ops=per_round)
            progress.detail(f"round {len(parts) + 1}")
            part = run_threads(target, work, 1, self.config.duration - spent)
            after += target.remaining(queue, strategy)
            parts.append(part)
            spent += part.seconds
            if part.ran_dry or part.ops == 0:
                break
        measurement = Measurement.merge(parts)
        self._record(row, measurement)
        row.notes["rounds"] = len(parts)
        self._check_exactly_once(row, measurement.popped, before, after, 0)

    def _measure_fill(
        self, target: Target, row: Row, queue: str, strategy: str | None, progress: Progress
    ) -> None:
        """Fill an empty queue to the row's depth in batches: items/s, and the peak memory it took."""
        assert row.depth is not None
        reset_peak_memory()
        seconds = self._fill(target, queue, strategy, row.depth, progress)
        row.ops, row.seconds = row.depth, seconds
        row.ops_per_s = row.depth / seconds if seconds > 0 else 0.0
        row.peak_mib = peak_memory_mib()
        server = target.server_memory_mib()
        if server is not None:
            row.notes["server_peak_mib"] = round(server, 1)
        left = target.remaining(queue, strategy)
        row.exactly_once = left == row.depth
        if not row.exactly_once:
            self.failures.append(
                f"{row.label()}: pushed {row.depth:,} items into an empty queue, found {left:,}."
            )

    def _fill(
        self, target: Target, queue: str, strategy: str | None, count: int, progress: Progress
    ) -> float:
        started = time.monotonic()
        done = 0
        for batch in batches(self._next_block(), count):
            target.fill(queue, strategy, batch)
            done += len(batch)
            progress.detail(f"filling {done:,}/{count:,}")
        return time.monotonic() - started

    def _top_up(self, target: Target, row: Row, queue: str, strategy: str | None, progress: Progress,
                at_least: int = 0) -> None:
        """Fill the queue so that the row's clients cannot empty it in the timed window.

        The estimate scales the fastest per-client rate seen so far on this target by the
        number of clients (at most twice the CPU count: beyond that, clients share CPUs).
        """
        per_client = self._rate_hint.get(row.target, 1000.0)
        expected = per_client * min(row.clients, self._scale_cap) * self.config.duration
        need = min(MAX_PREFILL, max(at_least, math.ceil(PREFILL_SAFETY * expected) + 100))
        have = target.remaining(queue, strategy)
        if have < need:
            self._fill(target, queue, strategy, need - have, progress)
        row.notes["queued_at_start"] = max(have, need)

    def _record(self, row: Row, measurement: Measurement) -> None:
        row.ops = measurement.ops
        row.seconds = round(measurement.seconds, 6)
        row.ops_per_s = measurement.ops_per_s
        row.p50_ms = measurement.latency.percentile_ms(0.50)
        row.p99_ms = measurement.latency.percentile_ms(0.99)
        row.peak_mib = measurement.peak_mib
        row.ran_dry = measurement.ran_dry
        if measurement.retries is not None:
            row.retries_by_code = dict(sorted(measurement.retries.items()))
            row.retries = sum(measurement.retries.values())
            row.retries_per_op = row.retries / row.ops if row.ops else 0.0

    def _check_exactly_once(self, row: Row, popped: list[Hashable], before: int, after: int, pushed: int) -> bool:
        """Every popped id distinct, and the queue's count changed by exactly what was done."""
        problems = []
        distinct = len(set(popped))
        if distinct != len(popped):
            problems.append(f"{len(popped) - distinct:,} item ids popped more than once")
        taken = len(popped)
        if before + pushed - taken != after:
            problems.append(
                f"{before:,} queued + {pushed:,} pushed - {taken:,} popped = {before + pushed - taken:,}, "
                f"but {after:,} remain"
            )
        row.exactly_once = not problems
        if problems:
            self.failures.append(f"{row.label()}: " + "; ".join(problems) + ".")
        return not problems

    def _learn_rate(self, row: Row) -> None:
        if row.depth is not None or row.ops_per_s <= 0 or row.operation == "wake":
            return  # a wake row's rate is its pusher's pace
        per_client = row.ops_per_s / min(row.clients, self._scale_cap)
        if row.operation == "push+pop":
            per_client *= 2  # a pair is two operations
        self._rate_hint[row.target] = max(self._rate_hint.get(row.target, 0.0), per_client)

    # -- relating rows -------------------------------------------------------------------------

    def _relate(self) -> None:
        index = {(r.target, r.operation, r.clients, r.mode, r.strategy, r.depth): r for r in self.rows}
        shallow, deep = self.config.shallow_depth, self.config.deep_size
        for row in self.rows:
            if row.target == OURS:
                for reference in REFERENCES:
                    same = (reference, row.operation, row.clients, row.mode, NO_STRATEGY, row.depth)
                    setattr(row, f"vs_{reference}", _ratio(row, index.get(same)))
            if row.operation == "pop" and row.depth is None:
                one = (row.target, "pop", 1, row.mode, row.strategy, None)
                row.vs_one_client = _ratio(row, index.get(one))
            if row.operation == "claim+ack":
                row.vs_pop = _ratio(row, index.get((row.target, "pop", 1, "threads", PLAIN_POP, None)))
            if row.group == "tasks" and row.target == OURS:
                row.vs_immediate = _ratio(row, index.get((IMMEDIATE, "tasks", 1, "threads", NO_STRATEGY, None)))
                row.vs_one_client = _ratio(row, index.get((OURS, "tasks", 1, "threads", NO_STRATEGY, None)))
            if row.depth == deep and deep != shallow:
                other = index.get((row.target, row.operation, row.clients, row.mode, row.strategy, shallow))
                row.vs_shallow = _ratio(row, other)

    def _check_memory(self) -> None:
        shallow, deep = self.config.shallow_depth, self.config.deep_size
        fills = {(r.target, r.depth): r for r in self.rows if r.operation == "fill"}
        for target in (OURS, *self.config.references):
            small, large = fills.get((target, shallow)), fills.get((target, deep))
            if small is None or large is None or small is large:
                continue
            if small.peak_mib is None or large.peak_mib is None:
                continue
            grown = large.peak_mib - small.peak_mib
            large.notes["fill_memory_growth_mib"] = round(grown, 1)
            if grown > FLAT_MEMORY_MIB:
                self.warnings.append(
                    f"{target}: filling {deep:,} items took {grown:.0f} MiB more peak memory than filling "
                    f"{shallow:,}; a fill should not grow with the queue."
                )

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
        if "sqlite" in references:
            references["sqlite"]["location"] = self._sqlite_location
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
        }
