"""What the bench's hook (:mod:`django_fdbqueue.bench.references`) calls: the ``--compare``
references, a private redis-server and a raw SQLite file beside the embedded store, each stopped
or removed when the run's exit stack closes; FoundationDB's recipe from the file given; the
comparison pop strategies; the tasks rows and the Tasks goal's reference; and the goals table
and chart.

The functions look the reference modules up when called, so a test that replaces one of their
functions replaces it for the bench too.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from django_fdbqueue.bench.progress import Progress
from django_fdbqueue.bench.references import ReferenceUnavailable
from django_fdbqueue.bench.targets import Target

from . import goals, plot, recipe_ref, recipe_source, redis_ref, sqlite_ref, strategies, task_rows, tasks_db_ref
from .directory import reference_directory

#: The mark the hook looks for: this is the project's references module.
FDBQUEUE_BENCH_REFERENCES = True


def check(name: str) -> None:
    """Raise ReferenceUnavailable (with what to install) unless reference ``name`` can run here."""
    if name == "redis":
        redis_ref.check_available()
    elif name != "sqlite":
        raise ReferenceUnavailable(f"No bench reference named {name!r}.")


def start(name: str, stack: contextlib.ExitStack, progress: Progress) -> Target:
    """Start reference ``name``; ``stack`` stops it and removes its files when the run ends."""
    check(name)
    return _start_redis(stack, progress) if name == "redis" else _open_sqlite(stack)


def _start_redis(stack: contextlib.ExitStack, progress: Progress) -> Target:
    """A redis-server of our own (no persistence), and the target that measures it."""
    server = stack.enter_context(redis_ref.RedisServer(redis_ref.check_available()))
    progress.note(f"Started redis-server {server.version} on 127.0.0.1:{server.port} (no persistence).")
    target = redis_ref.RedisTarget(server.port, server)
    stack.callback(target.close)
    return target


def _open_sqlite(stack: contextlib.ExitStack) -> Target:
    """The SQLite reference's target, its file beside the embedded store (its metadata says where)."""
    directory, location = stack.enter_context(reference_directory())
    target = sqlite_ref.SqliteTarget(os.path.join(directory, "reference.sqlite3"), location)
    stack.callback(target.close)
    return target


def load_recipe(path: str) -> recipe_source.RecipeSource:
    """FoundationDB's recipe code from the file given, checked (RecipeUnavailable says why not)."""
    return recipe_source.load_recipe(path)


def recipe_target(ours: Any, recipe: recipe_source.RecipeSource) -> Target:
    """The recipe on the store of ``ours`` (the app's target), on its very handle."""
    return recipe_ref.RecipeTarget.beside(ours, recipe)


def goals_table(result: Any) -> str:
    """The goals table of a finished run, as the report prints it."""
    return goals.goals_table(result)


def goals_data(result: Any) -> list[dict[str, Any]]:
    """The goals of a finished run, as the JSON document holds them."""
    return goals.as_data(goals.goals_of(result))


def check_plot_available() -> None:
    """Raise PlotUnavailable unless matplotlib can be imported."""
    plot.check_plot_available()


def write_plot(result: Any, path: str) -> None:
    """The run's chart, as a PNG at ``path``."""
    plot.write_plot(result, path)


def comparison_strategies() -> tuple[dict[str, Any], dict[str, Any]]:
    """The pop strategies that give up exact order, measured beside the service's, and their layouts."""
    return strategies.STRATEGIES, strategies.LAYOUTS


def tasks_db_missing() -> str | None:
    """Why django-tasks' database backend cannot be measured here, or None."""
    return tasks_db_ref.missing()


def tasks_missing() -> str | None:
    """Why the tasks rows cannot run here (the Tasks framework is an optional extra), or None."""
    return task_rows.framework_missing()


def measure_tasks(bench: Any, progress: Progress) -> dict[str, Any] | None:
    """The run's tasks rows, measured in place; how they ran (the run's metadata), or None."""
    return task_rows.measure(bench, progress)
