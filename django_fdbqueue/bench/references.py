"""The hook through which the project's references plug into the bench.

The references (``--compare``, ``--recipe``, the comparison pop strategies, the tasks rows, the
goals table and chart) are the project's, in the repository's ``benchmarks`` package, which the
wheel leaves out. The app reaches them through this module only, by import path
(:data:`PROVIDER`); from the wheel alone there are none, and asking for one is an error that says
so. The provider offers ``check(name)``, ``start(name, stack, progress)``, ``load_recipe(path)``,
``recipe_target(ours, recipe)``, ``comparison_strategies()``, ``goals_table(result)``,
``goals_data(result)``, ``check_plot_available()``, ``write_plot(result, path)``,
``tasks_missing()``, ``tasks_db_missing()`` and ``measure_tasks(bench, progress)``.

Where it is looked for, and why the references stay out of the app: the code map, "The bench's
references live beside the app" (docs/explanation/code-map.md).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from .progress import Progress
from .targets import Target

__all__ = [
    "PROVIDER",
    "PlotUnavailable",
    "RecipeUnavailable",
    "ReferenceUnavailable",
    "check",
    "check_plot_available",
    "comparison_strategies",
    "goals_data",
    "goals_table",
    "load_recipe",
    "measure_tasks",
    "provider",
    "recipe_target",
    "start",
    "tasks_db_missing",
    "tasks_missing",
    "write_plot",
]

#: The module that provides the references, in the repository beside the app.
PROVIDER = "benchmarks.references"
#: What the provider defines, so that another project's ``benchmarks`` is never taken for it.
MARK = "FDBQUEUE_BENCH_REFERENCES"
_NOT_HERE = (
    "the project's benchmarks (a clone): the references are not installed with the app; run the "
    "bench from a clone of the repository, where benchmarks/ is beside django_fdbqueue/"
)
_TASKS_DB = "django-tasks database backend reference (the Tasks goal's)"


class ReferenceUnavailable(Exception):
    """A ``--compare`` reference cannot run here; the message says why and what to do."""


class PlotUnavailable(Exception):
    """``--plot`` cannot draw here (no matplotlib, or no project's benchmarks); the message says why."""


class RecipeUnavailable(Exception):
    """FoundationDB's recipe cannot run from the file given, or at all here; the message says why."""


def provider() -> ModuleType | None:
    """The project's references module, or None where there is none (the app from a wheel)."""
    _add_clone_root()
    with contextlib.suppress(ImportError):
        module = importlib.import_module(PROVIDER)
        if getattr(module, MARK, False):
            return module
    return None


def _add_clone_root() -> None:
    """Put the clone's root last on ``sys.path`` when ``benchmarks/`` is beside the app's folder.

    Last, so it shadows nothing installed; spawned client processes inherit it.
    """
    root = Path(__file__).resolve().parents[2]
    if (root / "benchmarks" / "references.py").is_file() and str(root) not in sys.path:
        sys.path.append(str(root))


def _required(name: str) -> ModuleType:
    module = provider()
    if module is None:
        raise ReferenceUnavailable(f"--compare {name} needs {_NOT_HERE}.")
    return module


def check(name: str) -> None:
    """Raise :class:`ReferenceUnavailable` unless ``--compare NAME`` can run here."""
    _required(name).check(name)


def start(name: str, stack: contextlib.ExitStack, progress: Progress) -> Target:
    """Start the reference ``name``; the run's exit stack stops it and removes its files."""
    return cast(Target, _required(name).start(name, stack, progress))


def load_recipe(path: str) -> Any:
    """The recipe's code read and checked from ``path`` (``--recipe PATH``), before anything runs."""
    module = provider()
    if module is None:
        raise RecipeUnavailable(f"--recipe needs {_NOT_HERE}.")
    return module.load_recipe(path)


def recipe_target(ours: Target, recipe: Any) -> Target:
    """The recipe on the store of ``ours``; its code is run once now, so a broken one stops the run."""
    module = provider()
    if module is None:
        raise RecipeUnavailable(f"--recipe needs {_NOT_HERE}.")
    return cast(Target, module.recipe_target(ours, recipe))


def goals_table(result: Any) -> str:
    """The goals table of a finished run (a BenchResult), or "" without the project's benchmarks."""
    module = provider()
    return "" if module is None else cast(str, module.goals_table(result))


def goals_data(result: Any) -> list[dict[str, Any]]:
    """The goals of a finished run as JSON data; none without the project's benchmarks."""
    module = provider()
    return [] if module is None else cast("list[dict[str, Any]]", module.goals_data(result))


def check_plot_available() -> None:
    """Raise :class:`PlotUnavailable` unless ``--plot`` can draw here (checked before a long run)."""
    module = provider()
    if module is None:
        raise PlotUnavailable(f"--plot needs {_NOT_HERE} (the table and --json-file do not need it).")
    module.check_plot_available()


def write_plot(result: Any, path: str) -> None:
    """Draw the run's chart into ``path`` (a PNG)."""
    check_plot_available()
    cast(ModuleType, provider()).write_plot(result, path)


def comparison_strategies() -> tuple[dict[str, Any], dict[str, Any]]:
    """The project's comparison pop strategies and their layouts (name -> function, name ->
    Layout); none where the project's benchmarks are not here."""
    module = provider()
    if module is None:
        return {}, {}
    return cast("tuple[dict[str, Any], dict[str, Any]]", module.comparison_strategies())


def tasks_db_missing() -> str | None:
    """Why the Tasks goal's reference cannot run here (a "Skipped" line), or None."""
    module = provider()
    if module is None:
        return f"{_TASKS_DB}: it needs {_NOT_HERE}; so it is not measured."
    return cast("str | None", module.tasks_db_missing())


def tasks_missing() -> str | None:
    """Why the tasks rows cannot run here, or None: they are the project's, and need the Tasks framework."""
    module = provider()
    if module is None:
        return f"they need {_NOT_HERE}; so they are not measured."
    return cast("str | None", module.tasks_missing())


def measure_tasks(bench: Any, progress: Progress) -> dict[str, Any] | None:
    """Measure the run's tasks rows in place (a ``suite.Bench``); how they ran, or None when none did."""
    module = provider()
    if module is None:
        return None
    return cast("dict[str, Any] | None", module.measure_tasks(bench, progress))
