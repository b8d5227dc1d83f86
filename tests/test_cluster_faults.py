"""Faults on a real three-process FoundationDB cluster (issue 18): kill -9 under load, a whole-
cluster outage, ``commit_unknown_result``, and clients whose clocks disagree.

The three-process tests start one cluster for the module (``double`` redundancy, one zone per
process) with FoundationDB's binaries (``FDB_HOME`` or the packages); without them they are
skipped, or fail under ``FDBQUEUE_TEST_CLUSTER=require``. They carry the ``cluster`` marker; every
test here carries ``cluster_faults``, so ``pytest -m cluster_faults`` selects them all. The clock
tests need no fault and run on both engines.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from django_fdbqueue import connection, service
from django_fdbqueue.exceptions import LeaseGone
from django_fdbqueue.fdbapi import FDBError, describe
from django_fdbqueue.service._internals import contention
from django_fdbqueue.testing import plugin
from django_fdbqueue.testing.cluster import ClusterError, LocalCluster
from tests.admin_helpers import text, url
from tests.own_store_clients import api, operator_client  # noqa: F401 (fixtures)
from tests.cluster_helpers import SkewedClocks, buggified_pushes, need_binaries
from tests.processes import command_process, kill_leftovers

pytestmark = [pytest.mark.cluster_faults]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reliability" / "cluster_faults.py"
#: FDBQUEUE['TIMEOUT'] of the outage test: every call must give up within it (and a margin).
TIMEOUT = 2.0
ANSWER_WITHIN = TIMEOUT + 4.0
QUEUE = "faults.jobs"


# -- the module's cluster -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_processes() -> Iterator[str]:
    """One three-process cluster for the module; its cluster file. Stopped by the pids last saved."""
    need_binaries()
    started = LocalCluster(processes=3).start()
    try:
        yield started.cluster_file
    finally:
        cluster = started
        with contextlib.suppress(ClusterError):
            cluster = LocalCluster.load(started.cluster_file)  # a run may have restarted a process
        cluster.stop()


@pytest.fixture
def cluster(three_processes: str) -> LocalCluster:
    """The module's cluster with every process up, as its state file says (another run may have
    killed and restarted one)."""
    loaded = LocalCluster.load(three_processes)
    loaded.start_processes()
    loaded.wait_available(90)
    return loaded


def cluster_setting(cluster_file: str, **extra: Any) -> dict[str, Any]:
    setting: dict[str, Any] = {
        "ENGINE": "foundationdb",
        "CLUSTER_FILE": cluster_file,
        "ROOT": ("fdbqueue-test", uuid.uuid4().hex),
        **extra,
    }
    if plugin.client_library():
        setting["CLIENT_LIBRARY"] = plugin.client_library()
    return setting


@pytest.fixture
def store(cluster: LocalCluster, settings) -> Iterator[Any]:
    """The app on the module's cluster, with a short TIMEOUT, under a ROOT of its own."""
    settings.FDBQUEUE = cluster_setting(cluster.cluster_file, TIMEOUT=TIMEOUT)
    connection.reset_database()
    database = connection.get_database()
    yield database
    cluster.start_processes()  # a failed test may have left the cluster down
    with contextlib.suppress(FDBError):
        space = connection.root_subspace().range()
        del database[space.start : space.stop]
    connection.reset_database()


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    try:
        return call(), time.monotonic() - started
    except FDBError as error:
        return error, time.monotonic() - started


def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# -- kill -9 of one fdbserver under load (the scenario of issue 18) ------------------------------


@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_kill_9_of_one_fdbserver_under_load_loses_nothing_and_no_client_hangs(three_processes):
    """Pushers, claimers in blocking claims, a task worker; one fdbserver SIGKILLed mid-run.

    The script's checks: every acknowledged push delivered, each dedup key one item, no item held
    by two consumers at once, every client going again within a bound after the recovery and
    still going at the end (a client blocked in a future for good fails here, with its stack),
    every task run, the counters balanced. The figures are printed (``-s`` shows them).
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    completed = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--cluster-file",
            three_processes,
            "--duration",
            "16",
            "--kill-at",
            "5",
            "--timeout",
            "5",
            "--push-rate",
            "8",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=str(SCRIPT.parents[2]),
        env=env,
    )
    try:
        report = json.loads(completed.stdout)
    except ValueError:
        pytest.fail(
            f"no JSON report (exit {completed.returncode}):\n{completed.stdout[-2000:]}\n{completed.stderr[-4000:]}"
        )
    failed = [check for check in report.get("checks", []) if not check["ok"]]
    assert completed.returncode == 0 and report["ok"], (
        f"exit {completed.returncode}: {report.get('error')}\n"
        + "\n".join(f"FAIL {check['name']}: {check['detail']}" for check in failed)
        + f"\n{completed.stderr[-3000:]}"
    )
    numbers = report["figures"]
    assert numbers["pushes_acknowledged"] > 0 and numbers["claims"] > 0 and numbers["recovery_s"] is not None
    print("\ncluster faults:", json.dumps(numbers))


# -- the simulation's actors and invariants, one fdbserver SIGKILLed mid-run ------------------------


@pytest.mark.cluster
@pytest.mark.timeout(300)
def test_the_simulation_s_swarm_with_one_fdbserver_killed_breaks_no_invariant(cluster, store):
    """The deterministic simulation's actors and verdict (nothing lost, duplicated or unexpected;
    counters against a recount; key limits; liveness, allowed the outage) in real threads on the
    cluster, while one of its three processes is SIGKILLed and the cluster recovers."""
    from django_fdbqueue.testing.simulation.swarm import swarm

    seed = int.from_bytes(os.urandom(3), "big")
    killed = threading.Event()

    def kill() -> None:
        cluster.kill(0)
        killed.set()

    killer = threading.Timer(3.0, kill)
    killer.start()
    try:
        result = swarm(store, seed, seconds=12.0, liveness_seconds=20.0)
    finally:
        killer.cancel()
        killer.join(10)
        cluster.start_processes()
    assert killed.is_set(), "the swarm ended before the kill"
    assert result.operations > 50, "the swarm did next to nothing"
    assert result.ok, "\n".join([f"seed {seed}"] + [str(v) for v in result.violations] + result.trace[-60:])
    print(f"\nswarm of seed {seed} with a kill: {result.operations} operations, {dict(result.classes)}")


# -- every process stopped, then started again ------------------------------------------------------


def push_numbers(db: Any, numbers: range, seconds: float = 30) -> None:
    """Push ``{"n": n}`` with the dedup key ``n<n>``, each until acknowledged: a client that just
    reconnected may time out once, and the key makes a retry safe."""
    deadline = time.monotonic() + seconds
    for n in numbers:
        while True:
            try:
                service.push(db, QUEUE, {"n": n}, dedup_key=f"n{n}")
                break
            except FDBError:
                assert time.monotonic() < deadline, f"push of {n} never acknowledged"


def handled(directory: Path) -> set[int]:
    return {int(path.name.split("-", 1)[1]) for path in directory.glob("handled-*")}


@pytest.mark.cluster
@pytest.mark.django_db
@pytest.mark.timeout(180)
def test_with_every_process_stopped_calls_fail_within_the_timeout_and_all_resumes_after(
    cluster, store, api, operator_client, tmp_path, monkeypatch
):
    """The Python API raises 1031 within TIMEOUT, REST answers 503 with a JSON body, the admin its
    error page, the worker backs off (one log line per failed claim, not a flood); started again,
    everything goes on and every item is handled, each stored once."""
    service.create_queue(store, QUEUE)
    push_numbers(store, range(0, 5))
    work = tmp_path / "handled"
    work.mkdir()
    monkeypatch.setenv("FDBQUEUE_WORKER_TEST_DIR", str(work))
    with command_process(tmp_path, "worker") as start:
        worker, out, err = start(QUEUE, "--handler", "tests.worker_handlers.record", "--json")
        wait_for(lambda: handled(work) == set(range(5)), 60, "the worker to handle the first items")

        cluster.stop_processes()
        outage_began = time.monotonic()
        # The Python API: FoundationDB's own "timed out" error, within the TIMEOUT.
        for call in (
            lambda: service.push(store, QUEUE, {"n": 5}, dedup_key="n5"),
            lambda: service.claim(store, QUEUE),
            lambda: service.get_queue(store, QUEUE),
        ):
            error, elapsed = timed(call)
            assert isinstance(error, FDBError) and error.code == 1031, error
            assert "timed out" in describe(error) and elapsed < ANSWER_WITHIN, (describe(error), elapsed)
        # REST: 503 with Retry-After and a JSON body naming the error.
        body = {"value": {"n": 6}, "dedup_key": "n6"}
        response, elapsed = timed(lambda: api.post(f"/api/queues/{QUEUE}/push/", body, format="json"))
        assert response.status_code == 503 and elapsed < ANSWER_WITHIN, response.content
        assert response["Retry-After"] and response.json()["code"] == "database_unavailable"
        assert response.json()["fdb_error"] == 1031
        # The admin: its unavailable page, not a server error.
        response, elapsed = timed(lambda: operator_client.get(url("changelist")))
        assert response.status_code == 503 and elapsed < ANSWER_WITHIN
        assert "The queue store did not answer" in text(response) and "Traceback" not in text(response)
        # The worker: still up, one warning per failed claim (each costs the TIMEOUT, plus back-off).
        wait_for(lambda: err.read_text().count("Claim on queue") >= 2, 30, "the worker to meet the outage")
        outage = time.monotonic() - outage_began
        warnings = err.read_text().count("Claim on queue")
        assert worker.poll() is None
        assert warnings <= outage / TIMEOUT + 2, f"{warnings} warnings in {outage:.1f} s"

        cluster.start_processes()
        cluster.wait_available(90)
        push_numbers(store, range(5, 10))  # n5 again: its push timed out above, the key decides
        wait_for(lambda: handled(work) == set(range(10)), 60, "the worker to handle everything")
        worker.terminate()
        assert worker.wait(60) == 0
    info = service.get_queue(store, QUEUE)
    assert (info.pushed, info.popped, info.size, info.leased) == (10, 10, 0, 0)
    assert json.loads(out.read_text())["store_errors"] >= 1


# -- a client library that does not keep its own deadline --------------------------------------------


@pytest.mark.cluster
@pytest.mark.timeout(180)
def test_waits_are_bounded_even_when_the_client_library_keeps_no_deadline(cluster, store, caplog):
    """The hang of issue 18: claimers blocked for good in futures (the due read of a claim, the
    retry loop of a blocking claim, an ack's settle) although TIMEOUT was set. Here the client
    library is made to keep no deadline at all (its transaction timeout switched off on the handle)
    and the cluster is stopped: without the engine's own bound each call below blocks for good (the
    thread outlives its 60 s join), as a read through the binding's own API still would. With it
    each gives up with 1031 within the bound, logs the stacks once, and the same handle works
    again once the cluster is back."""
    from django_fdbqueue.engines.wait_bound import bound_for

    bound = bound_for(TIMEOUT)
    service.create_queue(store, QUEUE)
    push_numbers(store, range(0, 2))
    lease = service.claim(store, QUEUE, lease=600)
    store.options.set_transaction_timeout(0)  # FoundationDB's deadline gone: only ours is left
    cluster.stop_processes()
    try:
        for call in (
            lambda: service.claim(store, QUEUE, wait=1),  # due read, retry loop, watch wait
            lambda: service.ack(store, lease.receipt),  # the ack's settle
            lambda: service.pop(store, QUEUE, mode="high-contention"),
            lambda: service.push(store, QUEUE, {"n": 2}),
        ):
            error, elapsed = timed(lambda: in_thread(call))
            assert isinstance(error, FDBError) and error.code == 1031, error
            assert elapsed < 3 * bound + 10, elapsed  # each wait within the bound; a retry or two
    finally:
        cluster.start_processes()
        cluster.wait_available(90)
    assert sum("did not time the transaction out" in r.getMessage() for r in caplog.records) == 1
    with_stacks = next(r for r in caplog.records if "did not time the transaction out" in r.getMessage())
    assert "Stacks of this process" in with_stacks.getMessage() and "_wait_or_give_up" in with_stacks.getMessage()
    connection.reset_database()  # TIMEOUT applied again to the handle
    db = connection.get_database()
    service.ack(db, lease.receipt)  # its ack above never reached the cluster
    got = service.claim(db, QUEUE)
    assert got is not None and {lease.item.value["n"], got.item.value["n"]} == {0, 1}
    service.ack(db, got.receipt)
    assert service.get_queue(db, QUEUE).popped == 2


# -- commit_unknown_result on a real cluster ------------------------------------------------------------


@pytest.mark.cluster
@pytest.mark.timeout(240)
def test_pushes_with_dedup_keys_stay_exactly_once_when_commits_report_unknown_results(cluster, settings):
    """The client's own fault injection: 1021 on commits that did or did not happen, 1031 on
    commits still in flight. Each key is pushed until acknowledged; each is stored once."""
    setting = cluster_setting(cluster.cluster_file, TIMEOUT=5)
    settings.FDBQUEUE = setting
    connection.reset_database()
    db = connection.get_database()
    service.create_queue(db, QUEUE)
    keys = [f"k{n}" for n in range(150)]
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=buggified_pushes, args=(setting, QUEUE, keys, 10, results), name="buggified")
    child.start()
    try:
        seen = results.get(timeout=200)
        child.join(30)
        assert child.exitcode == 0
    finally:
        kill_leftovers([child])
    try:
        assert seen["retried"].get(1021, 0) > 0, f"no 1021 happened: {seen}"
        assert sorted(seen["ids"]) == sorted(keys) and all(len(set(ids)) == 1 for ids in seen["ids"].values())
        stored = service.browse(db, QUEUE, limit=500).items
        assert sorted(item.value["key"] for item in stored) == sorted(keys), "a key stored twice or not at all"
        assert {item.id for item in stored} == {ids[0] for ids in seen["ids"].values()}
        assert service.get_queue(db, QUEUE).pushed == len(keys)
        print("\nbuggified pushes:", json.dumps({"retried": seen["retried"], "raised": seen["raised"]}))
    finally:
        space = connection.root_subspace().range()
        del db[space.start : space.stop]
        connection.reset_database()


# -- clients whose clocks disagree ------------------------------------------------------------------------


@pytest.fixture
def clocks(monkeypatch) -> SkewedClocks:
    return SkewedClocks(monkeypatch)


def in_thread(target: Callable[[], Any], seconds: float = 60) -> Any:
    """Run ``target`` as another client (a thread of its own), bounded; its result or its error."""
    outcome: dict[str, Any] = {}

    def main() -> None:
        try:
            outcome["value"] = target()
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            outcome["error"] = error

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the other client did not finish"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_a_lease_holds_for_its_length_minus_the_skew_of_a_clock_ahead(fdbqueue_db, clocks):
    """Leases compare the claimer's clock with the clocks of later claimers. A client whose clock
    runs S seconds ahead takes a leased item S seconds early: a lease protects its holder for
    ``lease - S``, never less; and the first holder can then no longer ack (no double ack)."""
    lease, skew = 3.0, 1.0
    service.create_queue(fdbqueue_db, QUEUE)
    service.push(fdbqueue_db, QUEUE, "job")
    claimed = time.monotonic()  # before the claim reads the clock: the lease ends after claimed + lease
    first = service.claim(fdbqueue_db, QUEUE, lease=lease)

    def ahead_claims() -> tuple[Any, float]:
        with clocks.skewed(skew):
            deadline = time.monotonic() + lease + 10
            while time.monotonic() < deadline:
                got = service.claim(fdbqueue_db, QUEUE, lease=lease)
                if got is not None:
                    return got, time.monotonic() - claimed
                time.sleep(0.05)
        raise AssertionError("the item never came back")

    second, after = in_thread(ahead_claims)
    assert second.item.id == first.item.id
    assert after >= lease - skew - 0.01, f"taken {after:.2f} s into a {lease:g} s lease with {skew:g} s skew"
    with pytest.raises(LeaseGone):
        service.ack(fdbqueue_db, first.receipt)  # the stale holder cannot settle the new lease
    service.ack(fdbqueue_db, second.receipt)
    assert service.get_queue(fdbqueue_db, QUEUE).popped == 1


@pytest.mark.parametrize(
    "behind, served", [(contention.GRACE_SECONDS - 2, True), (contention.GRACE_SECONDS + 3, False)]
)
def test_high_contention_requests_survive_a_clock_behind_by_less_than_the_grace(fdbqueue_db, clocks, behind, served):
    """A staged pop's request carries its client's deadline; another client's fulfil round drops
    requests whose deadline passed ``GRACE_SECONDS`` ago by its own clock. A client whose clock is
    behind by less than the grace is served; one behind by more loses its request (its pop ends
    with 1031, a spurious timeout) and the item stays queued: never lost, never given twice."""
    service.create_queue(fdbqueue_db, QUEUE)
    service.push(fdbqueue_db, QUEUE, "job")
    wait = 2.0

    def behind_registers() -> Any:
        with clocks.skewed(-behind):
            pop = contention._Pop(QUEUE, "min", contention.now_micros() + int(wait * 1e6), time.monotonic() + wait)
            assert contention._arrive(fdbqueue_db, pop, stage=True) is contention.STAGED
            return pop

    pop = in_thread(behind_registers)
    round_ = contention.fulfil(fdbqueue_db, QUEUE)  # this client's clock is right
    assert round_.committed and (round_.served, round_.dropped) == ((1, 0) if served else (0, 1))

    def behind_collects() -> Any:
        with clocks.skewed(-behind):
            return contention._settle(fdbqueue_db, pop, withdraw=True)

    got = in_thread(behind_collects)
    if served:
        assert got.value == "job" and service.get_queue(fdbqueue_db, QUEUE).size == 0
    else:
        assert got is contention.GONE and service.get_queue(fdbqueue_db, QUEUE).size == 1
