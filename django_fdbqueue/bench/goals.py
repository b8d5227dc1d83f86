"""The figures the project has goals for, read off one run's rows, each against its goal.

Every goal is a ratio measured within one run, or a latency, so that it holds on a busy or slow
machine as well as on a quiet one:

* one client pushing then popping, pairs/s, against FoundationDB's recipe doing the same: >= 1x;
* one popper on a full queue, pops/s, against the recipe: >= 1x;
* :data:`MANY` popping processes (or the most the run has) against one popper, aggregate, with
  exactly-once delivery: >= 1x (the recipe's own ratio is shown beside it);
* claim + ack pairs/s against plain pops: reported, no goal;
* a pop blocked on an empty queue and woken by another process's push: p50 under
  :data:`WAKE_P50_MS` milliseconds.

The first three are given for every pop strategy the run measured: which one meets them on a
cluster is what the default pop mode should be chosen by. A goal whose rows were not measured
(no ``--recipe``, no process rows) shows no figure rather than a wrong one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

from .targets import OURS

__all__ = ["Goal", "MANY", "WAKE_P50_MS", "evaluate", "as_data"]

MANY = 8
WAKE_P50_MS = 20.0
_RECIPE = "recipe"
_NONE = "-"


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
    return _NONE if value is None else f"{value:.2f}x"


def _rate(row: Any, unit: str) -> str:
    return f"{row.ops_per_s:,.0f} {unit}"


def _at_least_one(workload: str, reference: str, ratio: float | None, extra_ok: bool = True) -> Goal:
    met = None if ratio is None else (ratio >= 1.0 and extra_ok)
    return Goal(workload, reference, ">= 1.0x", ratio, _times(ratio), met)


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


def _strategy_goals(rows: dict[tuple, Any], strategy: str, many: int | None) -> list[Goal]:
    goals = []
    for operation, workload, reference, unit in _ONE_CLIENT_GOALS:
        ours = rows.get((OURS, operation, 1, "threads", strategy, None))
        recipe = rows.get((_RECIPE, operation, 1, "threads", _NONE, None))
        goals.append(_at_least_one(
            f"{workload} ({strategy})",
            f"{reference}{_rate(recipe, unit)}" if recipe else "recipe: not run",
            ours.vs_recipe if ours else None,
        ))
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


def evaluate(rows: Sequence[Any], strategies: Sequence[str], clients: Sequence[int]) -> list[Goal]:
    """The goals table of a run (see the module's docstring)."""
    index = {(r.target, r.operation, r.clients, r.mode, r.strategy, r.depth): r for r in rows}
    many = _many(clients)
    goals = [goal for strategy in strategies for goal in _strategy_goals(index, strategy, many)]
    claims = index.get((OURS, "claim+ack", 1, "threads", _NONE, None))
    if claims is not None:
        plain = index.get((OURS, "pop", 1, "threads", "plain", None))
        goals.append(Goal(
            "claim + ack pairs/s",
            f"plain pop: {_rate(plain, 'pops/s')}" if plain else "plain pop: not run",
            "report",
            claims.vs_pop,
            f"{_times(claims.vs_pop)} ({_rate(claims, 'pairs/s')})",
            None,
        ))
    wake = index.get((OURS, "wake", 2, "processes", _NONE, None))
    if wake is not None:
        p50 = wake.p50_ms
        shown = _NONE if p50 is None else f"p50 {p50:.3g} ms, p99 {wake.p99_ms:.3g} ms ({wake.ops:,} wake-ups)"
        goals.append(Goal(
            "blocking pop woken by another process's push, latency",
            "-",
            f"p50 < {WAKE_P50_MS:g} ms",
            p50,
            shown,
            None if p50 is None else p50 < WAKE_P50_MS,
        ))
    return goals


def as_data(goals: Sequence[Goal]) -> list[dict[str, Any]]:
    return [asdict(goal) for goal in goals]
