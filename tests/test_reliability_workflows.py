"""The workflows bench (``scripts/reliability/workflows.py``) at CI size, on the embedded engine.

Two kill runs of a 40-member chord (a task worker process SIGKILLed in each, another started at
once) and the chain's commit count over 10 links. The script runs as a child process, with task
workers of its own on a temp store, and its checks must pass: each workflow and member
SUCCESSFUL, the callback started once with the right sum, the task queue empty, the chain in
order. Counts, not timings: the rates and the full-size runs are in the docs
(docs/explanation/reliability.md, "Workflows").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reliability" / "workflows.py"


@pytest.mark.timeout(150)
def test_kill_runs_of_a_chord_and_a_chain_pass_the_bench_checks():
    args = ["--engine", "embedded", "--runs", "2", "--members", "40", "--threads", "4", "--processes", "2"]
    args += ["--chain", "10", "--idle-seconds", "0.5", "--seed", "7", "--json"]
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=140,
        cwd=str(SCRIPT.parents[2]),
    )
    log = completed.stderr[-4000:]
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        pytest.fail(f"no JSON report (exit {completed.returncode}):\n{completed.stdout[-2000:]}\n{log}")
    failed = [f"FAIL {check['name']}: {check['detail']}" for check in report.get("checks", []) if not check["ok"]]
    assert completed.returncode == 0 and report["ok"], (
        f"exit {completed.returncode}: {report.get('error')}\n" + "\n".join(failed) + f"\n{log}"
    )
    runs = report["kill_loop"]["runs"]
    assert len(runs) == 2
    assert all(run["killed_pid"] for run in runs)  # a worker was killed in each run
    assert report["kill_loop"]["summary"]["failures"] == 0
    assert len(report["checks"]) == 6
    chain = report["chain"]
    # Exact on the embedded engine: a link's release is inside its predecessor's ack transaction.
    assert chain["counter"] == "history" and chain["lone_commits"] >= 2 * chain["links"]
    assert chain["extra_commits_per_link"] < 1
