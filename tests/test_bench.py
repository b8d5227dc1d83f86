"""``manage.py fdbqueue bench`` at a tiny size: every row measured, exactly-once held, files written.

The bench runs once per engine (module-scoped: a run takes seconds, and every test below reads the
same results), with --compare sqlite and, when Debian's redis-server is installed, redis too, and
a few tasks in the tasks rows. No test looks at a rate or a latency: on a shared machine only the
shape of the results is stable.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test.utils import override_settings

from django_fdbqueue import connection, service
from django_fdbqueue.bench import redis_ref, task_rows
from django_fdbqueue.bench.strategies import STRATEGIES
from django_fdbqueue.bench.suite import Bench, BenchConfig
from django_fdbqueue.tasks.compat import task_backends
from django_fdbqueue.testing import plugin
from tests.conftest import ENGINES

pytestmark = pytest.mark.timeout(180)

REDIS_INSTALLED = redis_ref.find_server() is not None
NO_REDIS = (
    "redis-server is not installed (Debian: apt-get install redis-server; ./scripts/test installs it "
    "as root), so the Redis reference rows are not measured"
)
DEEP_SIZE = 300
SHALLOW_SIZE = 30  # what the bench compares a deep queue of 300 with (a tenth of it)
CLIENTS = (1, 2)
TASKS = 30  # per tasks row
TASK_WORKERS = (1, 4)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass
class BenchRun:
    engine: str
    references: tuple[str, ...]
    document: dict
    stdout: str
    stderr: str
    png: Path
    leftover_queues: list[str]
    leftover_task_keys: int
    leftover_children: list
    leftover_servers: list[int]
    task_aliases_after: set[str]


def _task_keys(database) -> int:
    """Keys under the task results' subspace (records, listing and retention entries)."""
    from django_fdbqueue.connection import root_subspace
    from django_fdbqueue.fdbapi import transactional
    from django_fdbqueue.tasks import results

    @transactional
    def count(tr) -> int:
        space = root_subspace()[results.TASKS]
        return sum(1 for _ in tr.get_range(space.range().start, space.range().stop))

    return count(database)


def _redis_servers_started_by_us() -> list[int]:
    """Pids of redis-server processes whose parent is this process (Linux /proc)."""
    pids = []
    if not os.path.isdir("/proc"):
        return pids
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)
            name = fields[0].split("(", 1)[1]
            parent = int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and name.startswith("redis-server"):
            pids.append(int(entry))
    return pids


@pytest.fixture(scope="module", params=ENGINES)
def bench_run(request, tmp_path_factory) -> BenchRun:
    """One quick bench run on a fresh store of the engine, with the references available here."""
    engine = request.param
    directory = tmp_path_factory.mktemp(f"bench-{engine}")
    root = ("fdbqueue-test", uuid.uuid4().hex)
    setting = plugin.store_settings(engine, root, str(directory / "store.sqlite3"))
    references = ("redis", "sqlite") if REDIS_INSTALLED else ("sqlite",)
    json_path, png_path = directory / "bench.json", directory / "bench.png"
    out, err = io.StringIO(), io.StringIO()
    with override_settings(FDBQUEUE=setting):
        connection.reset_database()
        try:
            call_command(
                "fdbqueue", "bench", "--quick",
                "--duration", "0.2",
                "--clients", ",".join(map(str, CLIENTS)),
                "--deep-size", str(DEEP_SIZE),
                "--tasks", str(TASKS),
                "--compare", ",".join(references),
                "--json-file", str(json_path),
                "--plot", str(png_path),
                stdout=out, stderr=err,
            )
            database = connection.get_database()
            leftovers = [q.name for q in service.list_queues(database, prefix="fdbqueue-bench.").items]
            leftover_task_keys = _task_keys(database)
            if engine == "foundationdb":
                from django_fdbqueue.fdbapi import fdb

                space = fdb.Subspace(root)
                del database[space.range().start : space.range().stop]
        finally:
            connection.reset_database()
    return BenchRun(
        engine=engine,
        references=references,
        document=json.loads(json_path.read_text(encoding="utf-8")),
        stdout=out.getvalue(),
        stderr=err.getvalue(),
        png=png_path,
        leftover_queues=leftovers,
        leftover_task_keys=leftover_task_keys,
        leftover_children=multiprocessing.active_children(),
        leftover_servers=_redis_servers_started_by_us(),
        task_aliases_after=set(task_backends.settings),
    )


def expected_rows(target: str) -> set[tuple]:
    """(target, operation, clients, mode, strategy, depth) of every row the run must have."""
    strategies = tuple(STRATEGIES) if target == "fdbqueue" else ("-",)
    rows = {(target, "push", 1, "threads", "-", None)}
    rows |= {(target, "push+pop", 1, "threads", s, None) for s in strategies}
    rows |= {
        (target, "pop", clients, mode, s, None)
        for s in strategies
        for mode in ("threads", "processes")
        for clients in CLIENTS
    }
    rows |= {
        (target, operation, 1, "threads", "-", depth)
        for depth in (SHALLOW_SIZE, DEEP_SIZE)
        for operation in ("fill", "peek", "pop")
    }
    return rows


def key(row: dict) -> tuple:
    return (row["target"], row["operation"], row["clients"], row["mode"], row["strategy"], row["depth"])


def rows_of(run: BenchRun, target: str) -> list[dict]:
    """The target's queue rows (the tasks rows have tests of their own)."""
    return [row for row in run.document["rows"] if row["target"] == target and row["group"] != "tasks"]


def tasks_rows(run: BenchRun) -> list[dict]:
    return [row for row in run.document["rows"] if row["group"] == "tasks"]


def test_every_row_of_ours_is_measured(bench_run):
    ours = rows_of(bench_run, "fdbqueue")
    assert {key(row) for row in ours} == expected_rows("fdbqueue")
    assert len(ours) == len(expected_rows("fdbqueue"))  # no row twice
    for row in ours:
        assert row["ops"] > 0 and row["seconds"] > 0 and row["ops_per_s"] > 0, row
        assert row["peak_mib"] > 0, row
        if row["operation"] != "fill":
            assert 0 < row["p50_ms"] <= row["p99_ms"], row
            # retries come from fdbapi.retry_counts(), for threads and (per child) for processes
            assert row["retries"] is not None and row["retries_per_op"] is not None, row
            assert row["retries"] == sum(row["retries_by_code"].values()), row


def test_exactly_once_held_in_every_row_that_pops(bench_run):
    assert bench_run.document["exactly_once"] == {"passed": True, "failures": []}
    assert bench_run.document["meta"]["exactly_once_passed"] is True
    for row in bench_run.document["rows"]:
        if row["operation"] in ("pop", "push+pop", "push", "fill", "tasks"):
            assert row["exactly_once"] is True, row
        if row["depth"] is None and row["operation"] == "pop":
            assert row["ran_dry"] is False, row  # the queue was filled for the whole window
    assert "Exactly-once: passed" in bench_run.stdout


def test_scaling_and_depth_ratios(bench_run):
    for target in ("fdbqueue", *bench_run.references):
        for row in rows_of(bench_run, target):
            if row["operation"] == "pop" and row["depth"] is None:
                assert row["vs_one_client"] > 0, row
                if row["clients"] == 1:
                    assert row["vs_one_client"] == 1.0
            if row["depth"] == DEEP_SIZE:
                assert row["vs_shallow"] > 0, row
            elif row["depth"] == SHALLOW_SIZE:
                assert row["vs_shallow"] is None


def test_sqlite_reference_rows_and_ratios(bench_run):
    assert {key(row) for row in rows_of(bench_run, "sqlite")} == expected_rows("sqlite")
    for row in rows_of(bench_run, "sqlite"):
        assert row["retries"] is None and row["vs_sqlite"] is None, row  # a reference has no ratio to itself
    for row in rows_of(bench_run, "fdbqueue"):
        assert row["vs_sqlite"] > 0, row
    meta = bench_run.document["meta"]["references"]["sqlite"]
    assert meta["journal_mode"] == "wal" and meta["synchronous"] == "normal"


@pytest.mark.skipif(not REDIS_INSTALLED, reason=NO_REDIS)
def test_redis_reference_rows_and_ratios(bench_run):
    assert {key(row) for row in rows_of(bench_run, "redis")} == expected_rows("redis")
    for row in rows_of(bench_run, "fdbqueue"):
        assert row["vs_redis"] > 0, row
    assert bench_run.document["meta"]["references"]["redis"]["server_version"]
    headline = bench_run.document["headline"]
    assert any(line.startswith("One client push+pop pairs/s") and "redis" in line for line in headline)
    assert bench_run.leftover_servers == [], "the bench left its redis-server running"


def test_run_metadata(bench_run):
    meta = bench_run.document["meta"]
    assert meta["engine"] == bench_run.engine
    assert meta["strategies"] == list(STRATEGIES)
    assert meta["clients"] == list(CLIENTS)
    assert meta["deep_size"] == DEEP_SIZE and meta["shallow_size"] == SHALLOW_SIZE
    assert meta["cpu_count"] >= 1 and meta["python"] and meta["date"].endswith("Z")
    assert meta["compare"] == list(bench_run.references)


def test_chart_is_a_png(bench_run):
    data = bench_run.png.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000


def test_cleans_up_queues_and_client_processes(bench_run):
    assert bench_run.leftover_queues == []
    assert bench_run.leftover_children == []


# --- the tasks rows ---------------------------------------------------------------------------------


def test_tasks_rows_run_every_task_once_and_relate_to_the_immediate_backend(bench_run):
    rows = {(row["target"], row["clients"]): row for row in tasks_rows(bench_run)}
    assert set(rows) == {*(("fdbqueue", workers) for workers in TASK_WORKERS), ("immediate", 1)}
    assert len(tasks_rows(bench_run)) == len(rows)
    for row in rows.values():
        assert (row["operation"], row["mode"], row["strategy"], row["depth"]) == ("tasks", "threads", "-", None)
        assert row["exactly_once"] is True and row["seconds"] > 0 and row["ops_per_s"] > 0, row
    immediate = rows[("immediate", 1)]
    assert immediate["vs_immediate"] is None and immediate["retries"] is None
    assert immediate["ops"] == TASKS * immediate["notes"]["rounds"]  # the same N, repeated
    for workers in TASK_WORKERS:
        ours = rows[("fdbqueue", workers)]
        assert ours["ops"] == TASKS
        assert ours["vs_immediate"] > 0 and ours["vs_one_client"] > 0, ours
        assert ours["notes"]["enqueue_per_s"] > 0
        assert ours["retries"] == sum(ours["retries_by_code"].values()), ours
        assert ours["vs_redis"] is None and ours["vs_sqlite"] is None
    assert rows[("fdbqueue", 1)]["vs_one_client"] == 1.0


def test_tasks_rows_in_the_report_and_metadata(bench_run):
    meta = bench_run.document["meta"]["tasks"]
    assert meta["per_row"] == TASKS and meta["workers"] == list(TASK_WORKERS)
    assert meta["reference"].endswith(".backends.immediate.ImmediateBackend")
    assert meta["queue_prefix"].startswith("fdbqueue-bench.") and meta["framework"]
    assert bench_run.document["skipped"] == [] and bench_run.document["meta"]["skipped"] == []
    assert "Tasks (Django Tasks" in bench_run.stdout and "VS IMMEDIATE" in bench_run.stdout
    assert any(line.startswith("Tasks/s with 4 worker threads") for line in bench_run.document["headline"])


def test_tasks_rows_leave_no_results_and_no_backends_behind(bench_run):
    assert bench_run.leftover_task_keys == 0
    assert task_rows.BACKEND_ALIAS not in bench_run.task_aliases_after
    assert task_rows.IMMEDIATE_ALIAS not in bench_run.task_aliases_after


def test_without_the_tasks_framework_the_tasks_rows_are_skipped(fdbqueue_db, monkeypatch):
    monkeypatch.setattr(task_rows, "framework_missing", lambda: "no Tasks framework here.")
    bench = Bench(BenchConfig.build(quick=True, tasks=5), fdbqueue_db)
    assert bench.rows and not [row for row in bench.rows if row.group == "tasks"]
    assert bench.skipped == ["Tasks rows: no Tasks framework here."]
    left_out = Bench(BenchConfig.build(quick=True, tasks=0), fdbqueue_db)
    assert not [row for row in left_out.rows if row.group == "tasks"] and left_out.skipped == []


def test_progress_is_one_line_per_row_off_a_terminal(bench_run):
    lines = [line for line in bench_run.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == len(bench_run.document["rows"])
    assert "\r" not in bench_run.stderr


# --- refusals before anything runs ---------------------------------------------------------------


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("fdbqueue", "bench", *args, stdout=out, stderr=err)
    except CommandError as error:
        return error.returncode, out.getvalue(), str(error)
    return 0, out.getvalue(), err.getvalue()


def test_compare_redis_without_redis_server_is_exit_code_2(fdbqueue_db, monkeypatch):
    monkeypatch.setattr(redis_ref, "find_server", lambda: None)
    code, out, message = _run("--quick", "--compare", "redis")
    assert code == 2 and out == ""
    assert "redis-server" in message and "apt-get install redis-server" in message


def test_unknown_strategy_and_reference_are_usage_errors(fdbqueue_db):
    code, _, message = _run("--quick", "--strategy", "no-such-strategy")
    assert code == 2 and "no-such-strategy" in message and "plain" in message
    code, _, message = _run("--quick", "--compare", "memcached")
    assert code == 2 and "memcached" in message


def test_a_negative_task_count_is_a_usage_error(fdbqueue_db):
    code, _, message = _run("--quick", "--tasks", "-1")
    assert code == 2 and "--tasks" in message
