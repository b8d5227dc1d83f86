"""The figures the project has goals for, read off one run's rows, each against its goal.

Every goal is a ratio measured within one run, or a latency, so that it holds on a busy or slow
machine as well as on a quiet one. The goals depend on the engine measured (the run's
``meta["engine"]``): a FoundationDB cluster is held to FoundationDB's own recipe, the embedded
engine to what else one would run on one machine (Redis, a raw SQLite table) and to itself.

On a cluster (``foundationdb``):

* one client pushing then popping, pairs/s, against FoundationDB's recipe doing the same: >= 1x;
* one popper on a full queue, pops/s, against the recipe: >= 1x;
* :data:`MANY` popping processes (or the most the run has) against one popper, aggregate, with
  exactly-once delivery: >= 1x (the recipe's own ratio is shown beside it);
* claim + ack pairs/s against plain pops: reported, no goal;
* many consumers of one queue, as threads, against one (:data:`SCALING_GOALS`): high-contention
  pops 32 >= 8x and 128 >= 12x, random-k and sharded pops 32 >= 12x, claim + ack pairs 32 >= 8x
  in exact order and as spread claims, Tasks 16 worker threads >= 6x one (both ways too). They are meant for a
  cluster with a production commit latency (>= 5 ms: ``scripts/fdb-cluster start
  --commit-latency 5ms``); a goal whose rows the run did not measure is left out.

On the embedded engine (``embedded``):

* one client pushing then popping, pairs/s, against Redis (ZADD + ZPOPMIN) doing the same:
  >= :data:`REDIS_PAIRS`, and against a raw SQLite table: >= :data:`SQLITE_PAIRS`;
* :data:`MANY` popping processes against one popping process, aggregate pops/s, with exactly-once
  delivery: >= :data:`PROCESSES_VS_ONE` (the recipe is not the reference here);
* claim + ack pairs/s against one client's plain pops: >= :data:`CLAIMS_VS_POP`;
* peak memory with the deep queue against the shallow one, flat: for each of fill, peek and pop,
  the deep row's PEAK MIB at most :data:`FLAT_MEMORY_TIMES` times the shallow row's, or at most
  :data:`FLAT_MEMORY_SLACK_MIB` above it (whichever allows more: tiny figures move by a few MiB).

On both:

* a pop blocked on an empty queue and woken by another process's push: p50 under
  :data:`WAKE_P50_MS` milliseconds;
* N Django tasks enqueued and run through the app's backend with one worker thread, every task
  enqueued before the worker starts, tasks/s, against django-tasks' database backend on SQLite
  (WAL) doing the same with one worker: >= 3x
  (:data:`TASKS_VS_DB_BACKEND`), with exactly-once results.

The per-strategy goals are given for every pop strategy the run measured: which one meets them
is what the default pop mode should be chosen by. The ratios are the rows' own (``vs_recipe``,
``vs_redis``, ``vs_sqlite``, ``vs_one_client``, ``vs_pop``: see
:mod:`django_fdbqueue.bench.results`), so the table and the rows never disagree. A goal whose
rows were not measured (no ``--recipe`` or ``--compare``, no such client count, no deep queue)
shows "not run" and no figure rather than a wrong one, and is neither met nor failed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

from django_fdbqueue.bench.latency import summary as latency_summary
from django_fdbqueue.bench.report import store_phrase, table
from django_fdbqueue.bench.results import BenchResult
from django_fdbqueue.bench.targets import OURS
from django_fdbqueue.bench.task_names import ENQUEUED_FIRST, TASKS_DB
from django_fdbqueue.bench.workloads import HC_CLAIMS, SPREAD_CLAIMS

__all__ = [
    "CLAIMS_VS_POP",
    "EMBEDDED",
    "FLAT_MEMORY_SLACK_MIB",
    "FLAT_MEMORY_TIMES",
    "Goal",
    "MANY",
    "PROCESSES_VS_ONE",
    "REDIS_PAIRS",
    "SCALING_GOALS",
    "SQLITE_PAIRS",
    "TASKS_VS_DB_BACKEND",
    "WAKE_P50_MS",
    "evaluate",
    "as_data",
    "goals_of",
    "goals_table",
]

MANY = 8
#: The cluster's scaling goals: (operation, strategy, clients, times one client of the same
#: series). Tasks are judged on the rows that enqueue every task first: one enqueuing thread
#: would otherwise cap them at one commit per task.
SCALING_GOALS = (
    ("pop", "high-contention", 32, 8.0),
    ("pop", "high-contention", 128, 12.0),
    ("pop", "random-k", 32, 12.0),
    ("pop", "sharded", 32, 12.0),
    ("claim+ack", "-", 32, 8.0),
    ("claim+ack", SPREAD_CLAIMS, 32, 8.0),
    ("claim+ack", HC_CLAIMS, 32, 4.0),
    ("tasks", "-", 16, 6.0),
    ("tasks", SPREAD_CLAIMS, 16, 6.0),
)
WAKE_P50_MS = 20.0
#: The engine (``meta["engine"]``) whose goals are the embedded ones; any other has the cluster's.
EMBEDDED = "embedded"
#: The embedded engine's goals (see the module's docstring).
REDIS_PAIRS = 1.3
SQLITE_PAIRS = 0.25
PROCESSES_VS_ONE = 0.9
CLAIMS_VS_POP = 0.7
#: The Tasks goal: ours with one worker thread, at least this many times the database backend's tasks/s.
TASKS_VS_DB_BACKEND = 3.0
FLAT_MEMORY_TIMES = 1.1
FLAT_MEMORY_SLACK_MIB = 4.0
_RECIPE = "recipe"
_NONE = "-"
_NOT_RUN = "not run"
_DEPTH_OPERATIONS = ("fill", "peek", "pop")


@dataclass(frozen=True)
class Goal:
    """One line of the goals table. ``met`` is None where there is no goal or no figure."""

    workload: str
    reference: str
    goal: str
    measured: float | None
    shown: str
    met: bool | None


def _times(value: float | None) -> str:
    """A ratio as the report's tables print it: 1.30x, and three significant digits below one (0.249x),
    so that a figure just under its goal never reads as the goal itself."""
    if value is None:
        return _NONE
    return f"{value:.2f}x" if value >= 1 else f"{value:.3g}x"


def _rate(row: Any, unit: str) -> str:
    return f"{row.ops_per_s:,.0f} {unit}"


def _at_least_one(workload: str, reference: str, ratio: float | None, extra_ok: bool = True) -> Goal:
    met = None if ratio is None else (ratio >= 1.0 and extra_ok)
    return Goal(workload, reference, ">= 1.0x", ratio, _times(ratio), met)


def _ratio_goal(
    workload: str,
    reference: str,
    times: float,
    ours: Any,
    ratio: float | None,
    unit: str,
    *,
    once: bool = True,
    not_run: str = _NOT_RUN,
) -> Goal:
    """A goal of at least ``times`` the reference: judged only when both rows ran.

    ``ours`` missing shows ``not_run``; the reference missing shows no figure (its own cell says
    "not run"). A row whose exactly-once check failed does not meet its goal, however fast it was.
    """
    if ours is None:
        return Goal(workload, reference, f">= {times:g}x", None, not_run, None)
    shown = _NONE if ratio is None else f"{_times(ratio)} ({_rate(ours, unit)})"
    met = None if ratio is None else ratio >= times
    if not once:
        shown, met = shown + ", NOT exactly once", False
    return Goal(workload, reference, f">= {times:g}x", ratio, shown, met)


def _many(clients: Sequence[int]) -> int | None:
    """The client count of the scaling goal: MANY when measured, else the largest above one."""
    counts = sorted(count for count in clients if count > 1)
    if not counts:
        return None
    return MANY if MANY in counts else counts[-1]


#: One-client goals against the recipe: our row's operation, the workload, the reference, the unit.
_ONE_CLIENT_GOALS = (
    ("push+pop", "one client, push then pop, pairs/s", "recipe doing the same: ", "pairs/s"),
    ("pop", "one popper on a full queue, pops/s", "recipe: ", "pops/s"),
)


def _strategy_goals(rows: dict[tuple[Any, ...], Any], strategy: str, many: int | None) -> list[Goal]:
    """A cluster's goals of one pop strategy, all against FoundationDB's recipe."""
    goals = []
    for operation, workload, reference, unit in _ONE_CLIENT_GOALS:
        ours = rows.get((OURS, operation, 1, "threads", strategy, None))
        recipe = rows.get((_RECIPE, operation, 1, "threads", _NONE, None))
        goals.append(
            _at_least_one(
                f"{workload} ({strategy})",
                f"{reference}{_rate(recipe, unit)}" if recipe else "recipe: not run",
                ours.vs_recipe if ours else None,
            )
        )
    if many is not None:
        crowd = rows.get((OURS, "pop", many, "processes", strategy, None))
        recipe_crowd = rows.get((_RECIPE, "pop", many, "processes", _NONE, None))
        reference = f"recipe: {_times(recipe_crowd.vs_one_client)}" if recipe_crowd else "recipe: not run"
        once = crowd is not None and crowd.exactly_once is True
        goal = _at_least_one(
            f"{many} popping processes vs 1 popper, aggregate, exactly once ({strategy})",
            reference,
            crowd.vs_one_client if crowd else None,
            once,
        )
        if crowd is not None and not once:
            goal = replace(goal, shown=goal.shown + ", NOT exactly once", met=False)
        goals.append(goal)
    return goals


#: The embedded engine's one-client references: the target, how its cell names it, the goal.
_PAIR_REFERENCES = (
    ("redis", "Redis, ZADD + ZPOPMIN", REDIS_PAIRS),
    ("sqlite", "raw SQLite table (WAL)", SQLITE_PAIRS),
)


def _embedded_strategy_goals(rows: dict[tuple[Any, ...], Any], strategy: str) -> list[Goal]:
    """The embedded engine's goals of one pop strategy: one client against Redis and raw SQLite
    (what one would run on one machine instead), and MANY popping processes against one (the
    engine serialises writers: more processes must not cost the queue its throughput)."""
    goals = []
    pairs = rows.get((OURS, "push+pop", 1, "threads", strategy, None))
    for name, label, times in _PAIR_REFERENCES:
        theirs = rows.get((name, "push+pop", 1, "threads", _NONE, None))
        goals.append(
            _ratio_goal(
                f"one client, push then pop, pairs/s ({strategy})",
                f"{label}: {_rate(theirs, 'pairs/s')}" if theirs else f"{label}: not run (--compare {name})",
                times,
                pairs,
                getattr(pairs, f"vs_{name}") if pairs and theirs else None,
                "pairs/s",
                once=pairs is None or pairs.exactly_once is not False,
            )
        )
    crowd = rows.get((OURS, "pop", MANY, "processes", strategy, None))
    one = rows.get((OURS, "pop", 1, "processes", strategy, None))
    goals.append(
        _ratio_goal(
            f"{MANY} popping processes vs 1, aggregate pops/s, exactly once ({strategy})",
            f"1 popping process: {_rate(one, 'pops/s')}" if one else f"1 popping process: {_NOT_RUN}",
            PROCESSES_VS_ONE,
            crowd,
            crowd.vs_one_client if crowd and one else None,
            "pops/s",
            once=crowd is None or crowd.exactly_once is True,
            not_run=f"not run (--clients without {MANY})",
        )
    )
    return goals


def evaluate(
    rows: Sequence[Any], strategies: Sequence[str], clients: Sequence[int], *, engine: str | None
) -> list[Goal]:
    """The goals table of a run on ``engine`` (see the module's docstring): the cluster's goals
    for ``foundationdb`` (or an unknown engine), the embedded engine's for ``embedded``."""
    index = {(r.target, r.operation, r.clients, r.mode, r.strategy, r.depth): r for r in rows}
    if engine == EMBEDDED:
        goals = [goal for strategy in strategies for goal in _embedded_strategy_goals(index, strategy)]
        extra = [_claims_goal(index, CLAIMS_VS_POP), _memory_goal(rows)]
    else:
        many = _many(clients)
        goals = [goal for strategy in strategies for goal in _strategy_goals(index, strategy, many)]
        extra = [_claims_goal(index, None), *_scaling_goals(index)]
    extra += [_wake_goal(index), _tasks_goal(index)]
    return goals + [goal for goal in extra if goal is not None]


def _scaling_goals(rows: dict[tuple[Any, ...], Any]) -> list[Goal]:
    """Each of :data:`SCALING_GOALS` whose rows the run measured: many threads against one."""
    goals = []
    for operation, series, clients, times in SCALING_GOALS:
        mode = ENQUEUED_FIRST if operation == "tasks" else "threads"
        crowd = rows.get((OURS, operation, clients, mode, series, None))
        one = rows.get((OURS, operation, 1, mode, series, None))
        if crowd is None or one is None:
            continue
        if operation == "tasks":
            goals.append(_workers_goal(series, clients, times, crowd, one))
            continue
        unit = "pops/s" if operation == "pop" else "pairs/s"
        name = (
            f"{series} pops"
            if operation == "pop"
            else "claim + ack pairs, " + ("exact order" if series == _NONE else series)
        )
        goals.append(
            _ratio_goal(
                f"{name}, {clients} threads vs 1, aggregate",
                f"1 thread: {_rate(one, unit)}",
                times,
                crowd,
                crowd.vs_one_client,
                unit,
                once=crowd.exactly_once is not False,
            )
        )
    return goals


def _workers_goal(series: str, clients: int, times: float, crowd: Any, one: Any) -> Goal:
    """Tasks run by many worker threads against one, every task enqueued first: the workers' own
    rate (``run_per_s``), which one enqueuing thread does not cap."""
    claims = "exact order" if series == _NONE else series
    many, single = crowd.notes.get("run_per_s"), one.notes.get("run_per_s")
    ratio = many / single if many and single else None
    goal = Goal(
        f"Tasks run, {claims}, {clients} worker threads vs 1, every task enqueued first",
        f"1 worker thread: {single:,.0f} tasks/s" if single else "1 worker thread: not run",
        f">= {times:g}x",
        ratio,
        _NONE if ratio is None else f"{_times(ratio)} ({many:,.0f} tasks/s)",
        None if ratio is None else ratio >= times,
    )
    if ratio is not None and crowd.exactly_once is False:
        goal = replace(goal, shown=goal.shown + ", NOT exactly once", met=False)
    return goal


def _claims_goal(rows: dict[tuple[Any, ...], Any], times: float | None) -> Goal | None:
    """Claim + ack pairs against one client's plain pops: None when the run had no claim+ack row.

    A goal of ``times`` on the embedded engine; only reported (``times`` None) on a cluster.
    """
    claims = rows.get((OURS, "claim+ack", 1, "threads", _NONE, None))
    if claims is None:
        return None
    plain = rows.get((OURS, "pop", 1, "threads", "plain", None))
    reference = f"plain pop: {_rate(plain, 'pops/s')}" if plain else "plain pop: not run"
    if times is not None:
        ratio = claims.vs_pop if plain else None
        return _ratio_goal(
            "claim + ack pairs/s", reference, times, claims, ratio, "pairs/s", once=claims.exactly_once is not False
        )
    shown = f"{_times(claims.vs_pop)} ({_rate(claims, 'pairs/s')})"
    return Goal("claim + ack pairs/s", reference, "report", claims.vs_pop, shown, None)


def _memory_allowance(shallow_mib: float) -> float:
    """The most peak memory a deep row may take and still be flat against a shallow row's."""
    return max(shallow_mib * FLAT_MEMORY_TIMES, shallow_mib + FLAT_MEMORY_SLACK_MIB)


def _memory_goal(rows: Sequence[Any]) -> Goal:
    """Peak memory with the deep queue against the shallow one: items go in and out in batches and
    ranges, so a deeper queue must not take more memory. Each of fill, peek and pop is compared with
    the same operation on the shallow queue; the one nearest its allowance (or furthest over it) is
    shown, and the goal is met when every one is within its allowance."""
    peaks = {
        (row.operation, row.depth): row.peak_mib
        for row in rows
        if row.target == OURS and row.depth is not None and row.peak_mib
    }
    depths = sorted({depth for _, depth in peaks})
    goal = f"flat: <= {FLAT_MEMORY_TIMES:g}x, or <= +{FLAT_MEMORY_SLACK_MIB:g} MiB"
    shallow, deep = (depths[0], depths[-1]) if depths else (0, 0)
    pairs = []
    if deep != shallow:
        pairs = [
            (operation, peaks[operation, shallow], peaks[operation, deep])
            for operation in _DEPTH_OPERATIONS
            if (operation, shallow) in peaks and (operation, deep) in peaks
        ]
    if not pairs:
        workload = "peak memory (PEAK MIB) with the deep queue, one client, fill, peek, pop"
        return Goal(workload, f"the shallow queue: {_NOT_RUN}", goal, None, _NOT_RUN, None)
    operation, small, large = max(pairs, key=lambda pair: pair[2] / _memory_allowance(pair[1]))
    ratio = large / small
    return Goal(
        f"peak memory (PEAK MIB) with {deep:,} queued, one client, fill, peek, pop",
        f"the same row with {shallow:,} queued: {small:,.0f} MiB ({operation})",
        goal,
        ratio,
        f"{_times(ratio)} ({operation}: {large:,.0f} MiB)",
        large <= _memory_allowance(small),
    )


def _wake_goal(rows: dict[tuple[Any, ...], Any]) -> Goal | None:
    """The wake-up latency: None when the run had no wake row."""
    wake = rows.get((OURS, "wake", 2, "processes", _NONE, None))
    if wake is None:
        return None
    p50 = wake.p50_ms
    shown = _NONE if p50 is None else f"p50 {p50:.3g} ms, p99 {wake.p99_ms:.3g} ms ({wake.ops:,} wake-ups)"
    return Goal(
        "blocking pop woken by another process's push, latency",
        "-",
        f"p50 < {WAKE_P50_MS:g} ms",
        p50,
        shown,
        None if p50 is None else p50 < WAKE_P50_MS,
    )


def _tasks_goal(rows: dict[tuple[Any, ...], Any]) -> Goal | None:
    """Ours with one worker thread against the database backend: None when the run had no tasks rows.

    The row that enqueues every task before its worker starts, as the reference does; a run
    without it (an older JSON) is judged on the row that enqueues while the worker runs.
    """
    ours = rows.get((OURS, "tasks", 1, ENQUEUED_FIRST, _NONE, None))
    how = "1 worker thread, every task enqueued first, as the reference"
    if ours is None:
        ours, how = rows.get((OURS, "tasks", 1, "threads", _NONE, None)), "1 worker thread"
    if ours is None:
        return None
    database = rows.get((TASKS_DB, "tasks", 1, "processes", _NONE, None))
    ratio = ours.vs_tasks_db if database else None
    reference = "django-tasks database backend on SQLite (WAL)"
    once = ours.exactly_once is True and (database is None or database.exactly_once is True)
    goal = Goal(
        f"a Tasks enqueue + run, {ours.ops:,} tasks ({how})",
        f"{reference}: {_rate(database, 'tasks/s')}" if database else f"{reference}: not run",
        f">= {TASKS_VS_DB_BACKEND:g}x",
        ratio,
        _NONE if ratio is None else f"{_times(ratio)} ({_rate(ours, 'tasks/s')})",
        None if ratio is None else ratio >= TASKS_VS_DB_BACKEND and once,
    )
    if ratio is not None and not once:
        goal = replace(goal, shown=goal.shown + ", NOT exactly once", met=False)
    return goal


def as_data(goals: Sequence[Goal]) -> list[dict[str, Any]]:
    return [asdict(goal) for goal in goals]


def goals_of(result: BenchResult) -> list[Goal]:
    """The goals table of a finished run, on the engine it measured."""
    meta = result.meta
    return evaluate(result.rows, meta["strategies"], meta["clients"], engine=meta.get("engine"))


def goals_table(result: BenchResult) -> str:
    """The goals table as the report prints it: each figure against its reference and goal."""
    goals = goals_of(result)
    if not goals:
        return ""
    verdict = {True: "yes", False: "NO", None: "-"}
    cells = ([g.workload, g.reference, g.goal, g.shown, verdict[g.met]] for g in goals)
    body = table(["WORKLOAD", "REFERENCE", "GOAL", "MEASURED", "MET"], cells, 3)
    latency = latency_summary(result.meta.get("store_latency"))
    return f"Goals (ratios within this run; {store_phrase(result.meta)})\n" + (f"{latency}\n" if latency else "") + body
