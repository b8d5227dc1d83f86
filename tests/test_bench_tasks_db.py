"""The bench's django-tasks database backend reference: its own process, exactly once, and left out cleanly.

The reference runs for real with a few tasks (in a process with its own settings and SQLite
file); the ways it is left out (no package, a Django before 5.2, a process that cannot import it,
fails or falls silent) are simulated, and none of them may fail the bench. No test looks at a
rate beyond its being positive: on a shared machine only the shape of the results is stable.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import task_rows, tasks_db_ref
from django_fdbqueue.bench import references as hook
from benchmarks.goals import evaluate
from django_fdbqueue.bench.progress import Progress
from django_fdbqueue.bench.results import Row, relate
from django_fdbqueue.bench.runner import BenchError
from django_fdbqueue.bench.suite import NO_RECIPE, Bench, BenchConfig
from django_fdbqueue.bench.task_names import ENQUEUED_FIRST, TASKS_DB

pytestmark = pytest.mark.timeout(180)

TASKS = 25
#: The workload of the goal's row, for TASKS tasks.
GOAL_WORKLOAD = f"a Tasks enqueue + run, {TASKS} tasks (1 worker thread, every task enqueued first, as the reference)"


def need_reference() -> None:
    why = tasks_db_ref.missing()
    if why:
        pytest.skip(why)


@pytest.fixture
def store_beside(tmp_path, settings) -> Path:
    """An embedded store in its own directory: the reference's temporary directory goes beside it."""
    directory = tmp_path / "store"
    directory.mkdir()
    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(directory / "store.sqlite3")}
    return directory


@pytest.fixture
def processes(monkeypatch) -> list[subprocess.Popen]:
    """Every process the reference starts, to check that none outlives it."""
    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    def popen(*args, **kwargs):
        process = real(*args, **kwargs)
        started.append(process)
        return process

    monkeypatch.setattr(tasks_db_ref.subprocess, "Popen", popen)
    return started


def _silent(text: str) -> None:
    pass


def test_the_reference_runs_every_task_once_in_its_own_process(store_beside, processes):
    need_reference()
    details: list[str] = []
    run, meta = tasks_db_ref.run_database_backend(TASKS, details.append)
    assert run.problems == [], run.problems  # each task finished once, SUCCESSFUL, its own argument back
    assert run.tasks == TASKS and run.seconds > 0 and run.tasks_per_s > 0 and run.enqueue_per_s > 0
    assert run.enqueue_seconds <= run.seconds
    assert meta["package"].startswith("django-tasks-db ") and meta["backend"] == "django_tasks_db.DatabaseBackend"
    assert (meta["journal_mode"], meta["synchronous"]) == ("wal", "normal")
    assert meta["location"] == "beside the embedded store (same disk)"
    assert [process.poll() for process in processes] == [0]
    assert sorted(path.name for path in store_beside.iterdir()) == []  # its directory is gone


def test_a_process_that_cannot_import_the_backend_is_a_missing_reference(
    store_beside, processes, tmp_path, monkeypatch
):
    """A django_tasks_db that fails to import there (a stand-in found first on its path) is reported, no crash."""
    need_reference()
    shadow = tmp_path / "shadow" / "django_tasks_db"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("simulated: not importable here")\n', encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    with pytest.raises(tasks_db_ref.ReferenceMissing) as missing:
        tasks_db_ref.run_database_backend(TASKS, _silent)
    assert "simulated: not importable here" in str(missing.value) and "pip install" in str(missing.value)
    assert len(processes) == 1 and processes[0].poll() is not None
    assert list(store_beside.iterdir()) == []


def test_a_process_that_falls_silent_is_stopped_at_its_deadline(store_beside, processes, monkeypatch):
    """Setting up takes far longer than this deadline: the bench gives up on it, kills it, removes its files."""
    need_reference()
    monkeypatch.setattr(tasks_db_ref, "READY_SECONDS", 0.01)
    with pytest.raises(BenchError, match="showed no progress"):
        tasks_db_ref.run_database_backend(TASKS, _silent)
    assert len(processes) == 1 and processes[0].poll() is not None
    assert list(store_beside.iterdir()) == []


# --- left out of the bench, never failing it -------------------------------------------------------


def _bench(tasks: int = 5) -> Bench:
    """A run's plan: deciding which rows to leave out opens no store, so none is given."""
    return Bench(BenchConfig.build(quick=True, tasks=tasks), None)


def _has_reference_row(bench: Bench) -> bool:
    return any(row.target == TASKS_DB for row in bench.rows)


def test_without_the_package_the_reference_is_skipped_with_how_to_get_it(monkeypatch):
    real = tasks_db_ref.importlib.util.find_spec
    monkeypatch.setattr(
        tasks_db_ref.importlib.util,
        "find_spec",
        lambda name, *rest: None if name == "django_tasks_db" else real(name, *rest),
    )
    monkeypatch.setattr("django.VERSION", (5, 2, 0, "final", 0))
    bench = _bench()
    assert not _has_reference_row(bench)
    targets = [row.target for row in bench.rows if row.group == "tasks"]
    assert targets[-1] == "immediate" and set(targets[:-1]) == {"fdbqueue"} and len(targets) > 1
    line = bench.skipped[0]
    assert line.startswith("django-tasks database backend reference") and "not installed" in line
    assert "the app's 'bench-tasks-db' extra" in line and bench.skipped[1:] == [NO_RECIPE]
    left_out = _bench(tasks=0)  # --tasks 0: no tasks rows, so no line about them either
    assert not _has_reference_row(left_out) and left_out.skipped == [NO_RECIPE]


def test_before_django_5_2_the_reference_is_skipped_saying_so(monkeypatch):
    monkeypatch.setattr("django.VERSION", (4, 2, 20, "final", 0))
    bench = _bench()
    assert not _has_reference_row(bench)
    assert (
        "django-tasks-db needs Django 5.2 or later and this is Django 4.2.20, so it is not measured" in bench.skipped[0]
    )
    assert bench.skipped[1:] == [NO_RECIPE]


def test_without_the_projects_benchmarks_the_tasks_rows_are_skipped_saying_so(monkeypatch):
    """Installed from the wheel alone, the tasks rows and their references are not there: one
    "Skipped" line says where they are."""
    monkeypatch.setattr(hook, "PROVIDER", "fdbqueue_no_such_benchmarks.references")
    bench = _bench()
    assert not [row for row in bench.rows if row.group == "tasks"] and bench.rows
    line = bench.skipped[0]
    assert line.startswith("Tasks rows: they need the project's benchmarks (a clone)") and "not measured" in line
    assert bench.skipped[1:] == [NO_RECIPE]
    assert hook.measure_tasks(bench, _progress()) is None


def _reference_row(bench: Bench) -> Row:
    return next(row for row in bench.rows if row.target == TASKS_DB)


def _progress() -> Progress:
    return Progress(lambda text: None, 1, live=False)


def test_a_reference_its_process_cannot_import_is_skipped_during_the_run(monkeypatch):
    need_reference()
    bench = _bench()
    row = _reference_row(bench)

    def missing(count, detail):
        raise tasks_db_ref.ReferenceMissing("django-tasks database backend reference: simulated")

    monkeypatch.setattr(tasks_db_ref, "run_database_backend", missing)
    assert task_rows.run_tasks_db(bench, row, _progress()) is None
    assert row not in bench.rows and bench.skipped[-1] == "django-tasks database backend reference: simulated"
    assert bench.warnings == [] and bench.failures == []


def test_a_reference_that_fails_is_a_warning_not_a_failed_bench(monkeypatch):
    need_reference()
    bench = _bench()
    row = _reference_row(bench)

    def broken(count, detail):
        raise BenchError("simulated: the process exited with status 1")

    monkeypatch.setattr(tasks_db_ref, "run_database_backend", broken)
    assert task_rows.run_tasks_db(bench, row, _progress()) is None
    assert row not in bench.rows and bench.failures == []
    assert bench.warnings == [
        f"{row.label()}: not measured, the reference failed: simulated: the process exited with status 1"
    ]


# --- the ratio and the goal ---------------------------------------------------------------------------


def _tasks_rows(
    ours_per_s: float, database_per_s: float | None, exactly_once: bool = True, mode: str = ENQUEUED_FIRST
) -> list[Row]:
    rows = [
        Row("fdbqueue", "tasks", 1, mode, "-", ops=TASKS, seconds=1.0, ops_per_s=ours_per_s, exactly_once=exactly_once)
    ]
    if database_per_s is not None:
        rows.append(
            Row(
                TASKS_DB,
                "tasks",
                1,
                "processes",
                "-",
                ops=TASKS,
                seconds=1.0,
                ops_per_s=database_per_s,
                exactly_once=True,
            )
        )
    relate(rows, 1, 1)
    return rows


def _goal(rows: list[Row], engine: str = "embedded") -> dict:
    found = [goal for goal in evaluate(rows, ["plain"], [1], engine=engine) if goal.workload == GOAL_WORKLOAD]
    assert len(found) == 1
    return found[0].__dict__


@pytest.mark.parametrize(
    ("ours", "database", "shown", "met"),
    [(900.0, 300.0, "3.00x (900 tasks/s)", True), (600.0, 300.0, "2.00x (600 tasks/s)", False)],
)
def test_the_tasks_goal_is_three_times_the_database_backend(ours, database, shown, met):
    rows = _tasks_rows(ours, database)
    assert rows[0].vs_tasks_db == pytest.approx(ours / database) and rows[1].vs_tasks_db is None
    goal = _goal(rows)
    assert goal["goal"] == ">= 3x" and goal["shown"] == shown and goal["met"] is met
    assert goal["reference"] == "django-tasks database backend on SQLite (WAL): 300 tasks/s"


def test_the_tasks_goal_without_its_reference_or_exactly_once():
    goal = _goal(_tasks_rows(900.0, None))
    assert goal["reference"] == "django-tasks database backend on SQLite (WAL): not run"
    assert goal["measured"] is None and goal["met"] is None and goal["shown"] == "-"
    broken = _goal(_tasks_rows(900.0, 100.0, exactly_once=False))
    assert broken["met"] is False and broken["shown"].endswith(", NOT exactly once")
    for engine in ("embedded", "foundationdb"):  # no tasks rows: no tasks goal
        assert not [g for g in evaluate([], ["plain"], [1], engine=engine) if g.workload.startswith("a Tasks")]
    assert _goal(_tasks_rows(900.0, 300.0), "foundationdb") == _goal(_tasks_rows(900.0, 300.0))  # on both engines


def test_the_goal_is_judged_on_the_row_that_enqueues_first():
    """Of the two one-thread rows, the one run as the reference runs; an older run has only the other."""
    concurrent = Row("fdbqueue", "tasks", 1, "threads", "-", ops=TASKS, seconds=1.0, ops_per_s=450.0, exactly_once=True)
    rows = [concurrent, *_tasks_rows(900.0, 300.0)]
    relate(rows, 1, 1)
    assert _goal(rows)["shown"] == "3.00x (900 tasks/s)"
    older = [
        goal
        for goal in evaluate(_tasks_rows(450.0, 300.0, mode="threads"), ["plain"], [1], engine="embedded")
        if goal.workload.startswith("a Tasks")
    ]
    assert [goal.workload for goal in older] == [f"a Tasks enqueue + run, {TASKS} tasks (1 worker thread)"]
    assert older[0].shown == "1.50x (450 tasks/s)"


def test_the_reference_row_in_the_table():
    from django_fdbqueue.bench.report import format_report
    from django_fdbqueue.bench.results import BenchResult

    rows = _tasks_rows(900.0, 300.0)
    meta = {
        "strategies": ["plain"],
        "clients": [1],
        "engine": "embedded",
        "duration_s": 0.1,
        "deep_size": 10,
        "cpu_count": os.cpu_count(),
        "python": "3",
        "date": "today",
    }
    text = format_report(BenchResult(rows, meta, [], [], []))
    header = next(line for line in text.splitlines() if line.startswith("TARGET "))
    assert "VS IMMEDIATE" in header and "VS DB BACKEND" in header
    reference = next(line for line in text.splitlines() if line.startswith(TASKS_DB + " "))
    assert "1 process" in reference and " 300 " in reference
    ours = next(line for line in text.splitlines() if line.startswith("fdbqueue "))
    assert " 3.00x " in ours
    assert GOAL_WORKLOAD in text
    assert (
        "Tasks/s with 1 worker thread, every task enqueued first: 900 = 3x django-tasks database backend (300)" in text
    )
