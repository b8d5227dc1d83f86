"""What a run measures: its configuration, and the rows it measures in the order it measures them.

The targets take turns row by row (our row with every strategy, then the same row on each
reference), so the two sides of a ratio are measured seconds apart, under the same background
load: on a busy machine the ratios are what to read, not the absolute rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from .results import NO_STRATEGY, Row
from .strategies import registered
from .targets import OURS
from .task_names import ENQUEUED_FIRST, ENQUEUED_FIRST_WORKERS, IMMEDIATE, TASK_WORKERS, TASKS_DB
from .workloads import HC_CLAIMS, SPREAD_CLAIMS

#: The references ``--compare`` starts; the recipe comes with ``--recipe PATH`` instead.
COMPARE_CHOICES = ("redis", "sqlite")
MODES = ("threads", "processes")
#: Why the recipe rows are missing from a run without ``--recipe``.
NO_RECIPE = (
    "FoundationDB recipe rows: no recipe file given. --recipe PATH runs FoundationDB's own "
    "priority-queue recipe (its Python code, or the documentation page that holds it) beside the "
    "service on the same store, in the same run."
)

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
    #: FoundationDB's recipe, as the project's benchmarks read it (``references.load_recipe``).
    recipe: Any = None

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
        recipe: Any = None,
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
            deep_size=(deep_size if deep_size is not None else (QUICK_DEEP_SIZE if quick else DEFAULT_DEEP_SIZE)),
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


def plan(config: BenchConfig) -> list[Row]:
    """Every row the run will measure, in the order it measures them (unmeasured).

    Each kind of row is measured on every target in turn before the next kind: ours with each
    strategy, then each reference.
    """

    def on_every_target(
        operation: str, clients: int, mode: str, *, by_strategy: bool = True, depth: int | None = None
    ) -> list[Row]:
        rows: list[Row] = []
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
    for mode in config.modes:
        for clients in config.clients:
            for series in (NO_STRATEGY, SPREAD_CLAIMS, HC_CLAIMS):
                if (clients, mode, series) != (1, "threads", NO_STRATEGY):  # measured above
                    rows.append(Row(OURS, "claim+ack", clients, mode, series))
    rows.append(Row(OURS, "wake", 2, "processes", NO_STRATEGY))
    for depth in config.depths:
        for operation in ("fill", "peek", "pop"):
            rows += on_every_target(operation, 1, "threads", by_strategy=False, depth=depth)
    if config.tasks:
        # ImmediateBackend has no workers: each enqueue runs its task, on the bench's one thread.
        # The database backend runs in a process of its own, with one worker.
        rows += [Row(OURS, "tasks", workers, "threads", NO_STRATEGY) for workers in TASK_WORKERS]
        # Every task enqueued first, then the workers: what the workers alone can do, since one
        # enqueuing thread caps the rows above at a cluster's commit rate. With exact claims and
        # with the backend's CLAIM_SPREAD, for many workers on one task queue.
        rows += [
            Row(OURS, "tasks", workers, ENQUEUED_FIRST, series)
            for series in (NO_STRATEGY, SPREAD_CLAIMS)
            for workers in ENQUEUED_FIRST_WORKERS
        ]
        rows.append(Row(IMMEDIATE, "tasks", 1, "threads", NO_STRATEGY))
        rows.append(Row(TASKS_DB, "tasks", 1, "processes", NO_STRATEGY))
    return rows
