"""``manage.py fdbqueue bench`` at a tiny size: every row measured, exactly-once held, files written.

The bench runs once per engine (module-scoped: a run takes seconds, and every test below reads the
same results), with --compare sqlite and, when Debian's redis-server is installed, redis too, and
a few tasks in the tasks rows. With FDBQUEUE_BENCH_RECIPE naming FoundationDB's priority-queue
recipe (its documentation page, which the project does not ship), the recipe runs beside the
service too; without it those tests are skipped, and under FDBQUEUE_TEST_CLUSTER=require (CI) they
fail. No test looks at a rate or a latency: on a shared machine only the shape of the results is
stable.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test.utils import override_settings

from benchmarks import recipe_ref, redis_ref, task_rows, tasks_db_ref
from benchmarks.recipe_source import RecipeSource, extract_code, load_recipe
from django_fdbqueue import connection, service
from django_fdbqueue.bench import runner, stats
from django_fdbqueue.bench import references as hook
from django_fdbqueue.bench.references import RecipeUnavailable
from benchmarks.goals import CLAIMS_VS_POP, MANY, REDIS_PAIRS, SQLITE_PAIRS, TASKS_VS_DB_BACKEND, WAKE_P50_MS
from django_fdbqueue.bench.latency import PROBE_SAMPLES, probe, probe_key
from django_fdbqueue.bench.task_names import ENQUEUED_FIRST, TASKS_DB
from django_fdbqueue.bench.strategies import available
from django_fdbqueue.bench.suite import NO_RECIPE, Bench, BenchConfig
from django_fdbqueue.bench.workloads import HC_CLAIMS, SPREAD_CLAIMS
from django_fdbqueue.tasks.compat import task_backends
from django_fdbqueue.testing import plugin
from tests.conftest import ENGINES

pytestmark = pytest.mark.timeout(180)

REDIS_INSTALLED = redis_ref.find_server() is not None
NO_REDIS = (
    "redis-server is not installed (Debian: apt-get install redis-server; ./scripts/test installs it "
    "as root), so the Redis reference rows are not measured"
)
#: FoundationDB's priority-queue recipe (Python, or its documentation page), set by the test runner.
RECIPE = os.environ.get("FDBQUEUE_BENCH_RECIPE") or None
NO_RECIPE_FILE = (
    "FDBQUEUE_BENCH_RECIPE is not set: it names FoundationDB's priority-queue recipe (its "
    "documentation page or Python code), which the bench runs beside the service"
)
#: Rows only the app's queues have: no reference claims, acks or blocks in a pop.
#: Every strategy a run from the clone measures: the service's pop modes, then the project's.
STRATEGIES = tuple(available())
OURS_ONLY = ("claim+ack", "wake")
DEEP_SIZE = 300
SHALLOW_SIZE = 30  # what the bench compares a deep queue of 300 with (a tenth of it)
CLIENTS = (1, 2)
TASKS = 30  # per tasks row
TASK_WORKERS = (1, 4, 16)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Why django-tasks' database backend reference cannot run here (Django 4.2: the lowest run), or None.
TASKS_DB_MISSING = tasks_db_ref.missing()


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
    leftover_recipe_keys: int


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


def _recipe_keys(database) -> int:
    """Keys the recipe rows left under ROOT/"bench-recipe"."""
    from django_fdbqueue.connection import root_subspace
    from django_fdbqueue.fdbapi import transactional

    @transactional
    def count(tr) -> int:
        space = root_subspace()[recipe_ref.SPACE].range()
        return sum(1 for _ in tr.get_range(space.start, space.stop))

    return count(database)


def need_recipe(config: pytest.Config) -> str:
    """The recipe file, or skip (fail under FDBQUEUE_TEST_CLUSTER=require, where CI sets it)."""
    if RECIPE:
        return RECIPE
    mode = config.getoption("--fdbqueue-cluster", None) or os.environ.get(plugin.ENV_MODE)
    if mode == "require":
        pytest.fail(NO_RECIPE_FILE, pytrace=False)
    pytest.skip(NO_RECIPE_FILE)


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
    recipe = ("--recipe", RECIPE) if RECIPE else ()
    json_path, png_path = directory / "bench.json", directory / "bench.png"
    out, err = io.StringIO(), io.StringIO()
    with override_settings(FDBQUEUE=setting):
        connection.reset_database()
        try:
            call_command(
                "fdbqueue",
                "bench",
                "--quick",
                "--duration",
                "0.2",
                "--clients",
                ",".join(map(str, CLIENTS)),
                "--deep-size",
                str(DEEP_SIZE),
                "--tasks",
                str(TASKS),
                "--compare",
                ",".join(references),
                *recipe,
                "--json-file",
                str(json_path),
                "--plot",
                str(png_path),
                stdout=out,
                stderr=err,
            )
            database = connection.get_database()
            leftovers = [q.name for q in service.list_queues(database, prefix="fdbqueue-bench.").items]
            leftover_task_keys = _task_keys(database)
            leftover_recipe_keys = _recipe_keys(database)
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
        leftover_recipe_keys=leftover_recipe_keys,
    )


def expected_rows(target: str) -> set[tuple]:
    """(target, operation, clients, mode, strategy, depth) of every row the run must have."""
    strategies = tuple(STRATEGIES) if target == "fdbqueue" else ("-",)
    rows = {(target, "push", 1, "threads", "-", None)}
    rows |= {(target, "push+pop", 1, "threads", s, None) for s in strategies}
    if target == "fdbqueue":  # at-least-once consumption and blocking pops: the app's own
        rows |= {(target, "wake", 2, "processes", "-", None)}
        rows |= {
            (target, "claim+ack", clients, mode, series, None)
            for series in ("-", SPREAD_CLAIMS, HC_CLAIMS)
            for mode in ("threads", "processes")
            for clients in CLIENTS
        }
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
        if row["operation"] == "wake":
            continue  # its latency is its own (the wake-up test), and it counts no retries of the pusher
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
        if row["operation"] not in OURS_ONLY:
            assert row["vs_sqlite"] > 0, row
    meta = bench_run.document["meta"]["references"]["sqlite"]
    assert meta["journal_mode"] == "wal" and meta["synchronous"] == "normal"


@pytest.mark.skipif(not REDIS_INSTALLED, reason=NO_REDIS)
def test_redis_reference_rows_and_ratios(bench_run):
    assert {key(row) for row in rows_of(bench_run, "redis")} == expected_rows("redis")
    for row in rows_of(bench_run, "fdbqueue"):
        if row["operation"] not in OURS_ONLY:
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


def test_the_report_names_the_store_and_its_cluster_layout(bench_run):
    layout = bench_run.document["meta"]["cluster"]
    if bench_run.engine == "embedded":
        assert layout is None
        assert "Run: engine embedded (root" in bench_run.stdout
        return
    # Read from the cluster's own status: what kind of cluster every figure was measured on.
    assert layout["processes"] >= 1 and layout["redundancy_mode"] and layout["storage_engine"], layout
    assert layout["fdb_version"], layout
    assert f"{layout['storage_engine']} storage engine" in bench_run.stdout
    assert f"{layout['redundancy_mode']} redundancy" in bench_run.stdout


def test_the_report_prints_the_stores_commit_and_read_version_latency(bench_run):
    """Probed at the start and the end of the run: in the JSON, atop the tables, beside the goals
    and in the run's line, so no figure is read without the latency it was measured at."""
    latency = bench_run.document["meta"]["store_latency"]
    for when in ("start", "end"):
        probe = latency[when]
        assert probe["samples"] == PROBE_SAMPLES, probe
        assert 0 < probe["commit_ms"] <= probe["commit_max_ms"], probe
        assert 0 < probe["read_version_ms"] <= probe["read_version_max_ms"], probe
    lines = bench_run.stdout.splitlines()
    line = lines[0]
    assert line.startswith("Store latency: commit ") and "read version" in line and "at the end" in line, line
    assert f"medians of {PROBE_SAMPLES} at the start" in line
    goals = lines.index(next(text for text in lines if text.startswith("Goals (")))
    assert lines[goals + 1] == line
    assert line in next(text for text in lines if text.startswith("Run: "))
    assert "Store latency at the start: commit " in bench_run.stderr


def test_claim_and_ack_pairs_are_related_to_plain_pops(bench_run):
    claims = [r for r in rows_of(bench_run, "fdbqueue") if r["operation"] == "claim+ack"]
    for row in claims:
        assert row["exactly_once"] is True and row["ran_dry"] is False, row
        assert row["vs_pop"] > 0 and row["vs_one_client"] > 0, row
        assert row["retries"] == sum(row["retries_by_code"].values()), row
        if row["clients"] == 1:
            assert row["vs_one_client"] == 1.0, row
    section = bench_run.stdout.split("Concurrent claims", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"MODE +CLAIMS +CLIENTS +PAIRS/S", section), section
    assert f" {SPREAD_CLAIMS} " in section and " exact " in section


def test_concurrent_rows_record_the_cpu_an_operation_cost(bench_run):
    """Client CPU per operation on every concurrent row; a local cluster's servers' too, never the
    fdbserver processes of a cluster that is not the measured store (the embedded engine's run)."""
    concurrent = [
        r for r in rows_of(bench_run, "fdbqueue") if r["operation"] in ("pop", "claim+ack") and r["depth"] is None
    ]
    for row in concurrent:
        assert row["cpu_ms_per_op"] > 0 and 0 < row["cpu_busy"], row
        if bench_run.engine == "embedded":
            assert row["store_cpu_ms_per_op"] is None, row
    if bench_run.engine == "foundationdb" and stats.store_cpu_seconds() is not None:
        assert any(row["store_cpu_ms_per_op"] for row in concurrent)
    assert "CPU MS/OP" in bench_run.stdout and "CORES BUSY" in bench_run.stdout


def test_a_blocking_pop_is_woken_by_another_process_push(bench_run):
    (row,) = [r for r in rows_of(bench_run, "fdbqueue") if r["operation"] == "wake"]
    assert row["group"] == "wake" and row["ops"] >= 1, row  # wake-ups measured
    assert 0 < row["p50_ms"] <= row["p99_ms"], row
    assert row["exactly_once"] is True, row  # every push taken once or still queued
    assert "Wake-up (a pop blocked on an empty queue" in bench_run.stdout


def test_goals_table(bench_run):
    goals = {goal["workload"]: goal for goal in bench_run.document["goals"]}
    wake = goals["blocking pop woken by another process's push, latency"]
    assert wake["goal"] == f"p50 < {WAKE_P50_MS:g} ms" and wake["measured"] > 0
    assert wake["met"] is (wake["measured"] < WAKE_P50_MS)
    if bench_run.engine == "embedded":
        _embedded_goals(bench_run)
    else:
        _cluster_goals(goals)
    assert f"Goals (ratios within this run; engine {bench_run.engine}" in bench_run.stdout


def _cluster_goals(goals: dict[str, dict]) -> None:
    """A cluster is held to FoundationDB's recipe; claim + ack pairs are only reported."""
    claims = goals["claim + ack pairs/s"]
    assert claims["goal"] == "report" and claims["met"] is None and claims["measured"] > 0
    for strategy in STRATEGIES:  # the default pop mode is chosen by these, per strategy
        crowd = goals[f"{CLIENTS[-1]} popping processes vs 1 popper, aggregate, exactly once ({strategy})"]
        assert crowd["measured"] > 0 and crowd["met"] is (crowd["measured"] >= 1.0), crowd
        pairs = goals[f"one client, push then pop, pairs/s ({strategy})"]
        if RECIPE:
            assert pairs["measured"] > 0 and pairs["reference"].startswith("recipe doing the same: ")
        else:
            assert pairs["measured"] is None and pairs["met"] is None and pairs["reference"] == "recipe: not run"


def _embedded_goals(bench_run: BenchRun) -> None:
    """The embedded engine is held to Redis, raw SQLite and itself, never to the recipe."""
    goals = bench_run.document["goals"]
    assert not [goal for goal in goals if goal["reference"].startswith("recipe")]
    by_workload = {goal["workload"]: goal for goal in goals}
    claims = by_workload["claim + ack pairs/s"]
    assert claims["goal"] == f">= {CLAIMS_VS_POP:g}x" and claims["measured"] > 0
    assert claims["met"] is (claims["measured"] >= CLAIMS_VS_POP)
    memory = next(goal for goal in goals if goal["workload"].startswith(f"peak memory (PEAK MIB) with {DEEP_SIZE}"))
    assert memory["reference"].startswith(f"the same row with {SHALLOW_SIZE} queued: ") and memory["measured"] > 0
    assert isinstance(memory["met"], bool)
    for strategy in STRATEGIES:
        crowd = by_workload[f"{MANY} popping processes vs 1, aggregate pops/s, exactly once ({strategy})"]
        assert crowd["shown"].startswith("not run") and crowd["met"] is None  # --clients 1,2
        pairs = [goal for goal in goals if goal["workload"] == f"one client, push then pop, pairs/s ({strategy})"]
        assert [goal["goal"] for goal in pairs] == [f">= {REDIS_PAIRS:g}x", f">= {SQLITE_PAIRS:g}x"]
        redis, sqlite = pairs
        assert sqlite["measured"] > 0 and sqlite["met"] is (sqlite["measured"] >= SQLITE_PAIRS)
        if "redis" in bench_run.references:
            assert redis["measured"] > 0 and redis["met"] is (redis["measured"] >= REDIS_PAIRS)
        else:
            assert redis["measured"] is None and redis["met"] is None
            assert redis["reference"].endswith("not run (--compare redis)")


def test_without_a_recipe_file_its_rows_are_left_out_with_a_note(bench_run):
    if RECIPE:
        assert NO_RECIPE not in bench_run.document["skipped"]
        return
    assert NO_RECIPE in bench_run.document["skipped"] and "--recipe PATH" in NO_RECIPE
    assert rows_of(bench_run, "recipe") == []
    assert "Skipped:" in bench_run.stdout and "no recipe file given" in bench_run.stdout


def test_recipe_rows_beside_ours_on_the_same_store(bench_run, request):
    need_recipe(request.config)
    assert {key(row) for row in rows_of(bench_run, "recipe")} == expected_rows("recipe")
    for row in rows_of(bench_run, "recipe"):
        assert row["ops"] > 0 and row["retries"] is None and row["vs_recipe"] is None, row
        if row["operation"] != "peek":
            assert row["exactly_once"] is True, row
    for row in rows_of(bench_run, "fdbqueue"):
        if row["operation"] in OURS_ONLY:
            assert row["vs_recipe"] is None, row  # the recipe has neither
        else:
            assert row["vs_recipe"] > 0, row
    meta = bench_run.document["meta"]["references"]["recipe"]
    assert meta["source"] == os.path.abspath(RECIPE) and len(meta["sha256"]) == 64
    expected = "the binding's" if bench_run.engine == "foundationdb" else "django_fdbqueue.fdbapi's"
    assert meta["transactional"] == expected  # the binding's own retry loop on a cluster
    assert any(
        line.startswith("One client push+pop pairs/s") and "recipe" in line for line in bench_run.document["headline"]
    )
    assert bench_run.leftover_recipe_keys == 0, "the recipe's keys were left behind"


def test_chart_is_a_png(bench_run):
    data = bench_run.png.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000


def test_cleans_up_queues_and_client_processes(bench_run):
    assert bench_run.leftover_queues == []
    assert bench_run.leftover_children == []


# --- the tasks rows ---------------------------------------------------------------------------------


def test_tasks_rows_run_every_task_once_and_relate_to_the_immediate_backend(bench_run):
    rows = {
        (row["target"], row["clients"], row["mode"]): row for row in tasks_rows(bench_run) if row["strategy"] == "-"
    }
    first = [("fdbqueue", workers, ENQUEUED_FIRST) for workers in task_rows.ENQUEUED_FIRST_WORKERS]
    database = set() if TASKS_DB_MISSING else {(TASKS_DB, 1, "processes")}
    ours_first = ("fdbqueue", 1, ENQUEUED_FIRST)  # every task enqueued, then one worker: as the reference
    assert ours_first in first
    assert set(rows) == {
        *(("fdbqueue", workers, "threads") for workers in TASK_WORKERS),
        *first,
        ("immediate", 1, "threads"),
        *database,
    }
    spread = {row["clients"]: row for row in tasks_rows(bench_run) if row["strategy"] == SPREAD_CLAIMS}
    assert set(spread) == set(task_rows.ENQUEUED_FIRST_WORKERS)
    assert len(tasks_rows(bench_run)) == len(rows) + len(spread)
    for row in (*spread.values(), *(rows[key] for key in first)):  # the workers alone, and per series
        assert row["mode"] == ENQUEUED_FIRST and row["notes"]["run_per_s"] > 0, row
        assert row["exactly_once"] is True and row["ops"] == TASKS and row["vs_one_client"] > 0, row
    assert spread[1]["vs_one_client"] == 1.0 and rows[ours_first]["vs_one_client"] == 1.0
    for row in rows.values():
        assert (row["operation"], row["strategy"], row["depth"]) == ("tasks", "-", None)
        assert row["exactly_once"] is True and row["seconds"] > 0 and row["ops_per_s"] > 0, row
    immediate = rows[("immediate", 1, "threads")]
    assert immediate["vs_immediate"] is None and immediate["retries"] is None
    assert immediate["ops"] == TASKS * immediate["notes"]["rounds"]  # the same N, repeated
    for workers, mode in [*((workers, "threads") for workers in TASK_WORKERS), (1, ENQUEUED_FIRST)]:
        ours = rows[("fdbqueue", workers, mode)]
        assert ours["ops"] == TASKS
        assert ours["vs_immediate"] > 0, ours
        assert ours["vs_one_client"] > 0, ours  # each against one worker of its own series
        assert ours["notes"]["enqueue_per_s"] > 0
        assert ours["retries"] == sum(ours["retries_by_code"].values()), ours
        assert ours["vs_redis"] is None and ours["vs_sqlite"] is None
        assert (ours["vs_tasks_db"] is None) is bool(TASKS_DB_MISSING), ours
    assert rows[("fdbqueue", 1, "threads")]["vs_one_client"] == 1.0
    assert "1 thread, enqueued first" in bench_run.stdout


def test_the_database_backend_reference_row_and_its_goal(bench_run):
    """The Tasks goal: ours with one worker thread against django-tasks' database backend, same run,
    each enqueuing every task before its worker starts."""
    goal = next(g for g in bench_run.document["goals"] if g["workload"].startswith("a Tasks enqueue + run"))
    assert goal["workload"] == (
        f"a Tasks enqueue + run, {TASKS} tasks (1 worker thread, every task enqueued first, as the reference)"
    )
    assert goal["goal"] == ">= 3x"
    assert goal["reference"].startswith("django-tasks database backend on SQLite (WAL)")
    meta = bench_run.document["meta"]["tasks"]["database_backend"]
    if TASKS_DB_MISSING:
        assert goal["reference"].endswith(": not run") and goal["measured"] is None and goal["met"] is None
        assert meta is None and TASKS_DB_MISSING in bench_run.document["skipped"]
        return
    database = next(row for row in tasks_rows(bench_run) if row["target"] == TASKS_DB)
    assert database["ops"] == TASKS and database["notes"]["enqueue_per_s"] > 0
    assert database["vs_immediate"] is None and database["vs_tasks_db"] is None and database["retries"] is None
    ours = next(row for row in tasks_rows(bench_run) if row["target"] == "fdbqueue" and row["mode"] == ENQUEUED_FIRST)
    assert goal["measured"] == pytest.approx(ours["ops_per_s"] / database["ops_per_s"], rel=1e-3)
    assert goal["met"] is (goal["measured"] >= TASKS_VS_DB_BACKEND)
    assert meta["backend"] == "django_tasks_db.DatabaseBackend" and meta["package"].startswith("django-tasks-db ")
    assert (meta["journal_mode"], meta["synchronous"]) == ("wal", "normal")
    assert "VS DB BACKEND" in bench_run.stdout and "1 process" in bench_run.stdout
    assert "a Tasks enqueue + run" in bench_run.stdout and "Database backend: django-tasks-db" in bench_run.stdout
    headline = bench_run.document["headline"]
    assert any(
        line.startswith("Tasks/s with 1 worker thread") and "django-tasks database backend" in line for line in headline
    )
    assert any(line.startswith("Tasks/s of django-tasks' database backend") for line in headline)


def test_tasks_rows_in_the_report_and_metadata(bench_run):
    meta = bench_run.document["meta"]["tasks"]
    assert meta["per_row"] == TASKS and meta["workers"] == list(TASK_WORKERS)
    assert meta["reference"].endswith(".backends.immediate.ImmediateBackend")
    assert meta["queue_prefix"].startswith("fdbqueue-bench.") and meta["framework"]
    skipped = ([TASKS_DB_MISSING] if TASKS_DB_MISSING else []) + ([] if RECIPE else [NO_RECIPE])
    assert bench_run.document["skipped"] == skipped and bench_run.document["meta"]["skipped"] == skipped
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
    assert bench.skipped == ["Tasks rows: no Tasks framework here.", NO_RECIPE]
    left_out = Bench(BenchConfig.build(quick=True, tasks=0), fdbqueue_db)
    assert not [row for row in left_out.rows if row.group == "tasks"] and left_out.skipped == [NO_RECIPE]


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


@pytest.mark.parametrize("reference", ["redis", "sqlite"])
def test_compare_without_the_projects_benchmarks_is_exit_code_2(fdbqueue_db, monkeypatch, reference):
    """Installed from the wheel alone, the references are not there: the run is refused up front."""
    monkeypatch.setattr(hook, "PROVIDER", "fdbqueue_no_such_benchmarks.references")
    code, out, message = _run("--quick", "--compare", reference)
    assert code == 2 and out == ""
    assert message.startswith(f"--compare {reference} needs the project's benchmarks (a clone): "), message
    assert "benchmarks/ is beside django_fdbqueue/" in message


def test_plot_without_the_projects_benchmarks_is_exit_code_2(fdbqueue_db, monkeypatch, tmp_path):
    """The chart is the project's: from the wheel alone --plot is refused up front; the table is not."""
    monkeypatch.setattr(hook, "PROVIDER", "fdbqueue_no_such_benchmarks.references")
    code, out, message = _run("--quick", "--plot", str(tmp_path / "chart.png"))
    assert code == 2 and out == ""
    assert message.startswith("--plot needs the project's benchmarks (a clone): "), message


def test_another_benchmarks_package_is_not_taken_for_the_projects(monkeypatch, tmp_path):
    """A module at the provider's path without the project's mark is no provider (nothing else is asked of it)."""
    package = tmp_path / "fdbqueue_other_benchmarks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "references.py").write_text("def check(name):\n    raise AssertionError('called')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(hook, "PROVIDER", "fdbqueue_other_benchmarks.references")
    assert hook.provider() is None
    with pytest.raises(hook.ReferenceUnavailable, match="needs the project's benchmarks"):
        hook.check("sqlite")


def test_from_a_clone_the_hook_finds_the_projects_benchmarks():
    import benchmarks.references

    assert hook.provider() is benchmarks.references


def test_unknown_strategy_and_reference_are_usage_errors(fdbqueue_db):
    code, _, message = _run("--quick", "--strategy", "no-such-strategy")
    assert code == 2 and "no-such-strategy" in message and "plain" in message
    code, _, message = _run("--quick", "--compare", "memcached")
    assert code == 2 and "memcached" in message


def test_a_negative_task_count_is_a_usage_error(fdbqueue_db):
    code, _, message = _run("--quick", "--tasks", "-1")
    assert code == 2 and "--tasks" in message


# --- the recipe file ------------------------------------------------------------------------------
#
# Stand-ins written here with the recipe's interface: the project contains none of the recipe.

_STANDIN = """\
import os

space = fdb.Subspace(("S",))

@fdb.transactional
def push(tr, value, priority):
    tr[space[priority][os.urandom(8)]] = value

@fdb.transactional
def pop(tr, max=False):
    for kv in tr.get_range(space.range().start, space.range().stop, limit=1, reverse=max):
        del tr[kv.key]
        return kv.value

@fdb.transactional
def peek(tr, max=False):
    for kv in tr.get_range(space.range().start, space.range().stop, limit=1, reverse=max):
        return kv.value
"""


def _indented(code: str) -> str:
    return "".join(f"    {line}\n" if line else "\n" for line in code.splitlines())


def test_the_recipe_code_is_found_in_a_documentation_page(tmp_path):
    page = (
        "Title\n=====\n\nA fragment first::\n\n    tr[space[priority]] = value\n\n"
        "The code::\n\n" + _indented(_STANDIN) + "\nMore prose after it.\n"
    )
    assert extract_code(page) == _STANDIN
    markdown = "# Title\n\n```python\n" + _STANDIN + "```\n\nProse.\n"
    assert extract_code(markdown) == _STANDIN
    assert extract_code(_STANDIN) == _STANDIN  # a Python file as it is
    path = tmp_path / "recipe.rst"
    path.write_text(page, encoding="utf-8")
    loaded = load_recipe(str(path))
    assert loaded.code == _STANDIN and loaded.path == str(path) and len(loaded.sha256) == 64


def test_a_file_without_the_recipe_is_refused_with_what_was_looked_for(tmp_path):
    with pytest.raises(RecipeUnavailable, match=r"no Python code defining push\(\), pop\(\), peek\(\)"):
        extract_code("Prose only::\n\n    def push(tr, value, priority):\n        pass\n")
    with pytest.raises(RecipeUnavailable, match="no such file"):
        load_recipe(str(tmp_path / "missing.txt"))
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(RecipeUnavailable, match="not UTF-8"):
        load_recipe(str(binary))


def test_recipe_refusals_are_usage_errors_before_anything_runs(fdbqueue_db, tmp_path):
    code, out, message = _run("--quick", "--recipe", str(tmp_path / "missing.txt"))
    assert code == 2 and out == "" and "missing.txt: no such file" in message
    code, _, message = _run("--quick", "--compare", "recipe")
    assert code == 2 and "--recipe PATH" in message
    no_subspace = tmp_path / "no_subspace.py"
    no_subspace.write_text(_STANDIN.replace('space = fdb.Subspace(("S",))', "space = None"), encoding="utf-8")
    code, out, message = _run("--quick", "--tasks", "0", "--recipe", str(no_subspace))
    assert code == 2 and out == "" and "failed to load" in message and "Subspace" in message
    assert service.list_queues(fdbqueue_db, prefix="fdbqueue-bench.").items == []


def test_the_recipe_without_the_projects_benchmarks_is_exit_code_2(fdbqueue_db, monkeypatch, tmp_path):
    """Installed from the wheel alone, the recipe's runner is not there: refused before anything runs."""
    monkeypatch.setattr(hook, "PROVIDER", "fdbqueue_no_such_benchmarks.references")
    code, out, message = _run("--quick", "--recipe", str(tmp_path / "recipe.py"))
    assert code == 2 and out == ""
    assert message.startswith("--recipe needs the project's benchmarks (a clone): "), message


def test_the_recipe_runs_as_it_is_beside_the_service(fdbqueue_db, engine_name):
    """The stand-in's functions on the app's handle, its keys moved under ROOT/"bench-recipe"/queue."""
    from django_fdbqueue.bench.service_target import ServiceTarget
    from django_fdbqueue.connection import root_subspace

    target = recipe_ref.RecipeTarget.beside(ServiceTarget.from_settings(fdbqueue_db), RecipeSource("x", _STANDIN, "0"))
    target.prepare("q", None)
    target.fill("q", None, [({"n": n}, n % 3) for n in range(7)])
    assert target.remaining("q", None) == 7
    client = target.client("q", None)
    client.push({"n": 7}, -1)
    assert client.peek("min") == 7 and client.pop("min") == 7  # the lowest priority first
    assert client.pop("max") in (2, 5)
    assert target.remaining("q", None) == 6
    space = root_subspace()[recipe_ref.SPACE]["q"]
    keys = [bytes(kv.key) for kv in fdbqueue_db.get_range(space.range().start, space.range().stop)]
    assert len(keys) == 6 and all(key.startswith(space.key() + fdb_tuple_pack(("S",))) for key in keys)
    target.drop("q", None)
    assert target.remaining("q", None) == 0


def test_the_latency_probe_commits_a_clear_and_leaves_nothing_behind(fdbqueue_db):
    """Each sample is a read version and a real commit (a clear is a write), on either engine."""
    from django_fdbqueue.connection import root_subspace

    key = probe_key(root_subspace(), "probe-test")
    assert key.startswith(root_subspace().key())
    measured = probe(fdbqueue_db, key, samples=5)
    assert measured.samples == 5 and measured.commit_ms > 0 and measured.read_version_ms > 0
    assert measured.commit_ms <= measured.commit_max_ms
    space = root_subspace().range()
    assert list(fdbqueue_db.get_range(space.start, space.stop)) == []


def fdb_tuple_pack(value: tuple) -> bytes:
    from django_fdbqueue.fdbapi import fdb

    return fdb.tuple.pack(value)


# --- a pop row whose queue runs dry ----------------------------------------------------------------


def test_a_pop_row_that_runs_dry_is_measured_again_on_a_fuller_queue(fdbqueue_db, engine_name, monkeypatch):
    """The first prefill is far too small (5 items for a 0.3 s window): the row is measured again
    after a top-up sized from the rate the dry window showed (and, should that window run dry
    too, once more on twice as many), and exactly-once holds in every window."""
    from django_fdbqueue.bench.progress import Progress
    from django_fdbqueue.bench.runner import ProcessTeam
    from django_fdbqueue.bench.service_target import ServiceTarget
    from django_fdbqueue.bench.suite import Row

    bench = Bench(BenchConfig.build(quick=True, duration=0.3, strategies=["plain"], tasks=0), fdbqueue_db)
    real_top_up = Bench._top_up
    calls = []

    def top_up(self, target, row, queue, strategy, progress, at_least=0):
        calls.append(target.remaining(queue, strategy))
        if len(calls) == 1:
            self._fill(target, queue, strategy, 5, progress)  # far less than a window pops
            return
        real_top_up(self, target, row, queue, strategy, progress, at_least)

    monkeypatch.setattr(Bench, "_top_up", top_up)
    target = ServiceTarget.from_settings(fdbqueue_db)
    row = Row("fdbqueue", "pop", 1, "threads", "plain")
    queue = "fdbqueue-bench.dry"
    target.prepare(queue, "plain")
    with ProcessTeam() as team:
        bench._measure(target, row, queue, "plain", team, Progress(lambda text: None, 1, live=False))
    assert len(calls) in (2, 3) and calls[1] == 0  # the first window took all 5 and ran dry
    assert row.notes["measured_again"] == "the queue ran dry in the first window"
    assert row.ran_dry is False and row.ops > 5 and row.exactly_once is True, row
    assert bench.failures == [] and bench.warnings == []
    target.drop(queue, "plain")


class _Starved(Exception):
    code = 1031


def test_an_operation_that_times_out_is_counted_and_the_client_goes_on():
    """A pop starved past its transaction's TIMEOUT (1031) is counted, not fatal; other errors are."""
    outcomes = iter([_Starved(), "a", _Starved(), "b", "c"])

    def step():
        got = next(outcomes)
        if isinstance(got, Exception):
            raise got
        return got

    result = runner.drive(step, [float("inf")], max_ops=3)
    assert (result.ops, result.timed_out, result.popped) == (3, 2, ["a", "b", "c"])

    def broken():
        raise ValueError("not a timeout")

    with pytest.raises(ValueError):
        runner.drive(broken, [float("inf")], max_ops=1)


@pytest.mark.parametrize(
    "after, timed_out, held",
    [(7, 0, True), (6, 1, True), (5, 1, False), (6, 0, False), (8, 1, False)],
)
def test_items_taken_by_timed_out_pops_are_in_doubt_not_lost(after, timed_out, held):
    """10 queued, 3 popped: 7 remain; a timed-out pop may have taken one more (its commit in
    doubt), never two, and never given one back."""
    bench = Bench(BenchConfig.build(quick=True, tasks=0), db=None)
    row = bench.rows[0]
    assert bench._check_exactly_once(row, ["a", "b", "c"], 10, after, 0, timed_out) is held
    assert bool(bench.failures) is not held
    if timed_out:
        assert row.notes["timed_out"] == timed_out and "error 1031" in bench.warnings[0]
