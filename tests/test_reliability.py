"""The reliability proofs of ``scripts/reliability/`` at CI size: load, faults, kills, auth cost.

Each runs the script as a child process (it starts gunicorn, workers and clients of its own, on
a temp store and a free loopback port) and asserts its checks passed: nothing lost, nothing
consumed twice, no 5xx, and so on. Timings are printed by the scripts, never asserted here: they
depend on the machine. The full-size runs and their figures are in the README's Reliability
section.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "reliability"

pytest.importorskip("gunicorn", reason="the load runs serve the demo with gunicorn (the production extra)")
pytest.importorskip("httpx", reason="the load runs' clients use httpx (the test extra)")
pytest.importorskip("knox", reason="the load runs authenticate with django-rest-knox tokens (the tokens extra)")


def run_script(script: str, *args: str, timeout: float) -> dict[str, Any]:
    """Run a reliability script with ``--json``; its report, once every check passed."""
    completed = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args, "--json"],
        capture_output=True, text=True, timeout=timeout, cwd=str(SCRIPTS.parents[1]),
    )
    log = completed.stderr[-4000:]
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        pytest.fail(f"{script} printed no JSON report (exit {completed.returncode}):\n{completed.stdout[-2000:]}\n{log}")
    failed = [check for check in report.get("checks", []) if not check["ok"]]
    assert completed.returncode == 0 and report["ok"], (
        f"{script} exit {completed.returncode}: {report.get('error')}\n"
        + "\n".join(f"FAIL {check['name']}: {check['detail']}" for check in failed) + f"\n{log}"
    )
    return report


def check_names(report: dict[str, Any]) -> set[str]:
    return {check["name"] for check in report["checks"]}


@pytest.mark.timeout(150)
def test_a_load_run_loses_nothing_and_answers_no_5xx():
    """16 token clients on gunicorn, every operation, a task worker: the accounting balances."""
    report = run_script("load.py", "--duration", "10", "--lease", "4", timeout=140)
    assert report["config"]["clients"] >= 16
    operations = report["operations"]
    for op in ("push", "batch", "pop", "claim", "ack", "release"):
        assert operations[op]["requests"] > 0, op
    assert report["accounting"]["pushes_confirmed"] > 0
    assert report["tasks"]["enqueued"] > 0
    assert {"no 5xx response", "every confirmed push consumed or still queued", "consumed + still queued == pushed",
            "SQLite integrity_check"} <= check_names(report)


@pytest.mark.timeout(150)
def test_a_load_run_under_injected_commit_faults_loses_nothing():
    """1020 and both forms of 1021 on 6% of commits: dedup pushes and claim/ack stay exact."""
    report = run_script("load.py", "--duration", "10", "--lease", "4", "--task-lease", "3", "--faults", "0.06",
                        timeout=140)
    assert report["config"]["safe_mode"]
    assert "pop" not in report["operations"]  # a plain pop may lose its item under 1021 (documented)
    assert "faults were injected" in check_names(report)


@pytest.mark.timeout(180)
def test_a_load_run_survives_sigkill_of_a_server_worker_a_task_worker_and_a_consumer():
    """Acknowledged pushes survive, the file stays sound, and what the dead held comes back."""
    report = run_script("load.py", "--duration", "15", "--lease", "4", "--task-lease", "3", "--kill", timeout=170)
    assert [event["target"] for event in report["kills"]] == ["gunicorn-worker", "task-worker", "client"]
    assert {"the killed consumer held leases", "leased items come back",
            "a task running in the killed task worker ran again", "after the drain, every item consumed exactly once",
            "SQLite integrity_check"} <= check_names(report)


@pytest.mark.timeout(120)
def test_the_auth_cost_run_measures_tokens_sessions_and_basic_auth():
    """All three methods answer 200 under load; how fast each is, is reported, not judged."""
    report = run_script("auth_cost.py", "--seconds", "1.5", timeout=110)
    assert set(report["methods"]) == {"token", "session", "basic"}
    assert all(figures["requests"] > 0 for figures in report["methods"].values())


# -- found by the fault run --------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_task_whose_running_mark_meets_commit_unknown_result_counts_one_attempt(tmp_path, settings):
    """The fault run showed tasks run once but listed with 2 attempts: the RUNNING mark, retried
    after a 1021 that had applied, added the worker's id a second time (and the task saw
    ``context.attempt == 2`` on its first run)."""
    from django_fdbqueue import connection, service
    from django_fdbqueue.tasks import results
    from django_fdbqueue.tasks.compat import task_backends
    from django_fdbqueue.tasks.runner import TaskRunner
    from tests import task_functions

    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(tmp_path / "faults.sqlite3")}
    connection.reset_database()
    try:
        database = connection.get_database()
        result_id = task_functions.attempt_number.enqueue().id
        lease = service.claim(database, "tasks.default", end="max")
        database.faults.fail_next("unknown_applied")  # the next commit: the RUNNING mark
        TaskRunner(task_backends["default"], worker_id="w1")(lease.item)
        record = results.get(database, result_id)
        assert database.faults.injected["unknown_applied"] == 1
        assert (record.status, record.worker_ids, record.return_value) == ("SUCCESSFUL", ["w1"], 1)
    finally:
        connection.reset_database()
