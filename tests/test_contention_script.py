"""scripts/pop-contention.py: clients consuming one queue, their rate, latency, CPU use and retries.

The figures themselves are for the performance page, not for a test to judge; what is checked
here is that the script runs on either engine (it fails when a row delivers an item twice or
loses one), prints a line for each client count, as processes or threads, for plain and
high-contention pops and for claims, and refuses bad arguments.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import subprocess
import sys

import pytest

from django_fdbqueue.testing import plugin

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "pop-contention.py"

pytestmark = pytest.mark.timeout(300)


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=240, env=env)


def _store(engine: str) -> list[str]:
    """The script's arguments for a run on ``engine`` (the run's cluster for foundationdb)."""
    if engine == "embedded":
        return []
    library = plugin.client_library()
    return ["--cluster-file", plugin.need_cluster(), *(["--client-library", library] if library else [])]


def _rows(done: subprocess.CompletedProcess, header: str, columns: list[str], counts: list[str]) -> list[list[str]]:
    """The printed rows, after checking the run passed and its title and columns."""
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(header), lines[0]
    assert lines[1].split()[: len(columns)] == columns
    rows = [line.split() for line in lines[2 : 2 + len(counts)]]
    assert [row[0] for row in rows] == counts
    assert rows[0][2] == "1.00x" and all(row[2].endswith("x") and float(row[2][:-1]) > 0 for row in rows)
    for row in rows:
        assert row[3].endswith("%")
        p50, p99, cpu_per_op = float(row[4]), float(row[5]), float(row[6].replace(",", ""))
        assert 0 < p50 <= p99 and cpu_per_op > 0
    return rows


def test_a_run_reports_each_process_count_against_one(fdbqueue_engine):
    done = _run("--processes", "1,2", "--items", "300", *_store(fdbqueue_engine))
    store = "embedded engine" if fdbqueue_engine == "embedded" else "FoundationDB cluster: commit "
    rows = _rows(
        done,
        f"300 items popped by each count of processes, plain pops, {store}",
        ["PROCESSES", "POPS/S", "VS", "1"],
        ["1", "2"],
    )
    assert [row[7] for row in rows] == ["300", "300"]  # every item, each once
    lines = done.stdout.splitlines()
    if fdbqueue_engine == "embedded":
        assert lines[0] == "300 items popped by each count of processes, plain pops, embedded engine"
        assert len(lines) == 4
    else:
        assert "read version" in lines[0] and lines[4].startswith("After the rows: commit ") and len(lines) == 5


def test_threads_pop_in_high_contention_mode(fdbqueue_engine):
    done = _run("--threads", "1,4", "--items", "200", "--mode", "high-contention", *_store(fdbqueue_engine))
    rows = _rows(
        done,
        "200 items popped by each count of threads, high-contention pops, ",
        ["THREADS", "POPS/S", "VS", "1", "THREAD"],
        ["1", "4"],
    )
    assert [row[7] for row in rows] == ["200", "200"]


def test_claim_op_claims_and_acks(fdbqueue_engine):
    done = _run("--threads", "1,3", "--items", "120", "--op", "claim", *_store(fdbqueue_engine))
    rows = _rows(
        done,
        "120 items claimed and acked by each count of threads, plain claims and acks, ",
        ["THREADS", "CLAIMS/S", "VS", "1", "THREAD"],
        ["1", "3"],
    )
    assert [row[7] for row in rows] == ["120", "120"]
    assert "RETRIES PER CLAIM+ACK" in done.stdout.splitlines()[1]


def test_spread_claims_are_claimed_and_acked(fdbqueue_engine):
    done = _run("--threads", "1,3", "--items", "120", "--op", "claim", "--spread", "8", *_store(fdbqueue_engine))
    rows = _rows(
        done,
        "120 items claimed and acked by each count of threads, plain spread claims (one of the first 8) and acks, ",
        ["THREADS", "CLAIMS/S", "VS", "1", "THREAD"],
        ["1", "3"],
    )
    assert [row[7] for row in rows] == ["120", "120"]


def test_a_spread_without_claims_or_out_of_range_is_refused():
    for args in (("--spread", "8"), ("--op", "claim", "--spread", "1"), ("--op", "claim", "--spread", "101")):
        done = _run("--threads", "1", "--items", "10", *args)
        assert done.returncode == 2 and "--spread goes with --op claim and is from 2 to 100" in done.stderr, args


def test_a_timed_run_stops_at_its_time_or_when_empty(fdbqueue_engine):
    """Rows end when the time is up (the count is whatever was consumed by then, checked against
    what is left), or when the queue ran dry first, which the script says on stderr."""
    done = _run("--threads", "1,2", "--items", "50", "--seconds", "0.2", *_store(fdbqueue_engine))
    rows = _rows(done, "0.2 s of plain pops by each count of threads, ", ["THREADS", "POPS/S"], ["1", "2"])
    assert all(int(row[7].replace(",", "")) > 0 for row in rows)


def test_bad_arguments_are_refused_with_a_message():
    refused = {
        ("--processes", "one,two"): "--processes takes whole numbers",
        ("--processes", "0"): "at least 1",
        ("--threads", "1,0"): "--threads and --items must be at least 1",
        ("--processes", "1", "--threads", "2"): "not allowed with argument",
        ("--seconds", "0"): "--seconds must be more than 0",
        ("--mode", "fast"): "invalid choice: 'fast'",
        ("--op", "peek"): "invalid choice: 'peek'",
        ("--client-library", "libfdb_c.so"): "--client-library needs --cluster-file",
        ("--cluster-file", "no-such.cluster"): "--cluster-file: no-such.cluster is not a file",
    }
    for args, message in refused.items():
        done = _run(*args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert done.stdout == ""


def test_a_claim_mode_the_service_lacks_is_refused():
    from django_fdbqueue import service

    if "mode" in inspect.signature(service.claim).parameters:
        pytest.skip("service.claim takes a mode")
    done = _run("--threads", "1", "--items", "5", "--op", "claim", "--mode", "high-contention")
    assert done.returncode == 2 and "--mode high-contention applies to --op pop" in done.stderr


def _script_module():
    """The script as a module (its name has a hyphen), for its helpers."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pop_contention", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_operation_that_times_out_is_tried_again_and_counted():
    """At a real cluster's latency a contended claim can run into FDBQUEUE's TIMEOUT (1031): the
    client tries again, as a worker does, and the row counts it; other errors, and a client that
    only ever times out, fail the row."""
    from collections import Counter

    from django_fdbqueue.fdbapi import FDBError

    script = _script_module()
    outcomes = [FDBError(1031), FDBError(1031), "taken"]

    def call():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    timeouts = Counter()
    assert script.patiently(call, timeouts) == "taken" and timeouts == {1031: 2}

    def conflict():
        raise FDBError(1020)

    with pytest.raises(FDBError) as raised:
        script.patiently(conflict, Counter())
    assert raised.value.code == 1020

    def timeout():
        raise FDBError(1031)

    timeouts = Counter()
    with pytest.raises(FDBError):
        script.patiently(timeout, timeouts)
    assert timeouts == {1031: script.TIMEOUTS_IN_A_ROW - 1}
