"""scripts/pop-contention.py: popping processes on one queue, their rate, CPU use and retries.

The figures themselves are for the performance page, not for a test to judge; what is checked
here is that the script runs (it fails when the pops do not add up to the items it filled),
prints a line for each process count, and refuses bad arguments.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "pop-contention.py"

pytestmark = pytest.mark.timeout(300)


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=240, env=env
    )


def test_a_run_reports_each_process_count_against_one():
    done = _run("--processes", "1,2", "--items", "300")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "300 items popped by each count of processes, plain pops, embedded engine"
    assert lines[1].split()[:4] == ["PROCESSES", "POPS/S", "VS", "1"]
    one, two = (line.split() for line in lines[2:4])
    assert one[0] == "1" and one[2] == "1.00x" and one[3].endswith("%")
    assert two[0] == "2" and two[2].endswith("x") and float(two[2][:-1]) > 0
    assert len(lines) == 4


def test_bad_arguments_are_refused_with_a_message():
    done = _run("--processes", "one,two")
    assert done.returncode == 2 and "--processes takes whole numbers" in done.stderr
    done = _run("--processes", "0")
    assert done.returncode == 2 and "at least 1" in done.stderr
