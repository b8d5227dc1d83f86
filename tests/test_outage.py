"""The store unavailable: the API answers 503 with Retry-After, the admin its error page, workers
back off and recover, and nothing hangs.

Three ways the embedded store goes away, each made real rather than mocked:

- *locked*: another process holds SQLite's write lock (a long write transaction, a backup tool)
  longer than ``TIMEOUT``. Reads still work (WAL readers do not wait for writers); every commit
  must fail with 1031 within about ``TIMEOUT``, not after SQLite's own busy timeout of a minute.
- *unopenable*: the store's path cannot be a file (its parent is a file). Tests run as root, so
  ``chmod 000`` would not stop anyone; this does.
- *locked before opening*: a process holds the file in SQLite's exclusive locking mode, so the
  app cannot even open it.

A cluster file that points at nothing needs FoundationDB's client library; where it is missing
(as here) that case is skipped, saying so.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from django_fdbqueue import connection, service
from tests.admin_helpers import text, url
from tests.own_store_clients import api, operator_client  # noqa: F401 (fixtures)
from tests.processes import command_process

TIMEOUT = 1.0
# What "does not hang" means here: an answer within the TIMEOUT and a generous margin for a slow,
# shared CI machine, far below SQLite's minute-long busy timeout that the app used to wait out.
ANSWER_WITHIN = TIMEOUT + 4.0
QUEUE = "outage.jobs"
# Not conftest's "store.sqlite3", which its `embedded_db` fixture opens in the same tmp_path: a
# connection left open there would defeat the exclusive lock below.
STORE_FILE = "outage.sqlite3"


def handle_item(item: Any) -> None:
    """The worker test's handler: nothing to do; returning acks the item."""


@pytest.fixture
def store(tmp_path, settings) -> Any:
    """A fresh embedded store with a one-second TIMEOUT, and a queue on it."""
    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(tmp_path / STORE_FILE), "TIMEOUT": TIMEOUT}
    connection.reset_database()
    database = connection.get_database()
    service.create_queue(database, QUEUE)
    yield database
    connection.reset_database()


@contextlib.contextmanager
def write_lock(path: str) -> Iterator[None]:
    """Hold SQLite's write lock on the store from another connection, as another process would."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def assert_unavailable(response: Any, elapsed: float) -> dict:
    """A JSON 503 with Retry-After, answered without hanging."""
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "1"
    body = response.json()
    assert body["code"] == "database_unavailable"
    assert elapsed < ANSWER_WITHIN, f"answered after {elapsed:.1f} s"
    return body


# -- a store locked by another process past the TIMEOUT ------------------------------------------


@pytest.mark.django_db
def test_the_api_answers_503_while_another_process_holds_the_write_lock(store, api):
    """Writes fail with 1031 within TIMEOUT (not SQLite's minute), reads go on, and it all recovers."""
    push = lambda: api.post(f"/api/queues/{QUEUE}/push/", {"value": 1}, format="json")  # noqa: E731
    claim = lambda: api.post(f"/api/queues/{QUEUE}/claim/", {}, format="json")  # noqa: E731
    service.push(store, QUEUE, "ready")
    with write_lock(store.path):
        body = assert_unavailable(*timed(push))
        assert body["fdb_error"] == 1031
        assert_unavailable(*timed(claim))
        # Reads do not wait for writers: the queue can still be looked at.
        response, elapsed = timed(lambda: api.get(f"/api/queues/{QUEUE}/"))
        assert response.status_code == 200 and response.json()["size"] == 1 and elapsed < ANSWER_WITHIN
    # Nothing was half-written, and the API works again at once.
    assert push().status_code == 201
    assert service.get_queue(store, QUEUE).size == 2


@pytest.mark.django_db
def test_the_admin_shows_its_error_page_while_the_store_is_locked(store, operator_client):
    """A change the store refuses is the 503 page that says it may not have happened; reading works."""
    with write_lock(store.path):
        response, elapsed = timed(lambda: operator_client.post(url("push", QUEUE), {"value": '"x"'}))
        assert response.status_code == 503 and elapsed < ANSWER_WITHIN
        assert "The queue store did not answer" in text(response)
        assert "may or may not have taken effect" in text(response)
        assert operator_client.get(url("changelist")).status_code == 200  # reading still works
    response = operator_client.post(url("push", QUEUE), {"value": '"x"'})
    assert response.status_code == 302
    assert service.get_queue(store, QUEUE).size == 1


# -- a store that cannot be opened ------------------------------------------------------------------


@pytest.fixture
def unopenable(tmp_path, settings) -> Path:
    """FDBQUEUE points below a regular file: the store can never be created there."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the store's directory should be")
    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(blocker / STORE_FILE), "TIMEOUT": TIMEOUT}
    connection.reset_database()
    yield blocker
    connection.reset_database()


@pytest.mark.django_db
def test_an_unopenable_store_is_a_503_for_the_api_and_an_error_page_in_the_admin(unopenable, api, operator_client):
    """Opening fails with an OSError, not an FDBError: still an outage answer, with nothing leaked."""
    body = assert_unavailable(*timed(lambda: api.get("/api/queues/")))
    assert body["fdb_error"] is None
    assert "not-a-directory" not in str(body)  # no path or stack trace leaks out
    assert_unavailable(*timed(lambda: api.post(f"/api/queues/{QUEUE}/push/", {"value": 1}, format="json")))
    response, elapsed = timed(lambda: operator_client.get(url("changelist")))
    assert response.status_code == 503 and elapsed < ANSWER_WITHIN
    assert "The queue store did not answer" in text(response)
    assert "Traceback" not in text(response)


@pytest.mark.django_db
def test_a_store_locked_before_it_is_opened_is_a_503_within_the_timeout(tmp_path, settings, api, operator_client):
    """Opening waits for the lock no longer than TIMEOUT, then answers 503; the next request after works."""
    path = tmp_path / STORE_FILE
    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(path), "TIMEOUT": TIMEOUT}
    connection.reset_database()
    service.create_queue(connection.get_database(), QUEUE)
    connection.reset_database()  # closed: the next request opens the store again
    # Exclusive locking mode: once it has read the file, this connection keeps every other out.
    holder = sqlite3.connect(str(path), isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("SELECT count(*) FROM kv").fetchone()
        assert_unavailable(*timed(lambda: api.get(f"/api/queues/{QUEUE}/")))
        response, elapsed = timed(lambda: operator_client.get(url("changelist")))
        assert response.status_code == 503 and elapsed < ANSWER_WITHIN
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert api.get(f"/api/queues/{QUEUE}/").status_code == 200
    connection.reset_database()


# -- workers back off and recover ---------------------------------------------------------------------


def _wait_for(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.django_db
def test_workers_back_off_while_the_store_is_locked_and_recover_when_it_returns(store, tmp_path):
    """A queue worker and a task worker log 1031, back off, stay up, and finish the work afterwards."""
    from django_fdbqueue.tasks import results
    from tests import task_functions

    service.push(store, QUEUE, {"n": 0})
    with command_process(tmp_path, "worker") as start:
        worker, out, err = start(QUEUE, "--handler", "tests.test_outage.handle_item", "--json")
        tasks_worker, _, tasks_err = start("--tasks", "--json")
        _wait_for(lambda: service.get_queue(store, QUEUE).popped == 1, 30, "the worker's first item")
        # Both have opened the store (a worker that cannot open it at start exits with 3, by design).
        _wait_for(lambda: "Worker started" in tasks_err.read_text(), 30, "the task worker to start")
        # Work that becomes visible while the store is locked: 1.5 s from now.
        service.push_many(store, QUEUE, [{"n": n} for n in range(1, 6)], delay=1.5)
        run_after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1.5)
        task_id = task_functions.add.using(run_after=run_after).enqueue(2, 3).id
        with write_lock(store.path):
            # Both workers try, fail with 1031 within the TIMEOUT, and back off; none exits.
            _wait_for(
                lambda: "Claim on queue" in err.read_text() and "Claim on queue" in tasks_err.read_text(),
                20,
                "both workers to meet the locked store",
            )
            time.sleep(2 * TIMEOUT)
            assert worker.poll() is None and tasks_worker.poll() is None
        # The store is back: everything is handled without a restart.
        _wait_for(lambda: service.get_queue(store, QUEUE).popped == 6, 30, "the worker to catch up")
        _wait_for(lambda: results.get(store, task_id).status == "SUCCESSFUL", 30, "the task to run")
        for process in (worker, tasks_worker):
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0
    info = service.get_queue(store, QUEUE)
    assert (info.size, info.leased, info.delayed, info.dead) == (0, 0, 0, 0)
    assert results.get(store, task_id).return_value == 5
    log = err.read_text()
    assert "1031" in log, log
    assert json.loads(out.read_text())["store_errors"] >= 1


def test_a_worker_refuses_to_start_on_an_unopenable_store(unopenable, tmp_path):
    """Exit code 3 at once (documented), instead of running without a store."""
    with command_process(tmp_path, "worker") as start:
        worker, _, err = start(QUEUE, "--handler", "tests.test_outage.handle_item")
        assert worker.wait(60) == 3
    assert "cannot be opened" in err.read_text()


# -- a real cluster that is not there ------------------------------------------------------------------


@pytest.mark.django_db
def test_a_cluster_file_pointing_at_nothing_is_a_503_within_the_timeout(tmp_path, settings, api):
    """Needs libfdb_c: a cluster nobody serves times out into a 503 instead of hanging."""
    from django_fdbqueue.engines.foundationdb import client_library_error

    problem = client_library_error()
    if problem is not None:
        pytest.skip(f"needs FoundationDB's client library (libfdb_c), which cannot be loaded here: {problem}")
    cluster_file = tmp_path / "fdb.cluster"
    cluster_file.write_text("nothing:nowhere@127.0.0.1:1\n")  # a loopback port where nothing listens
    settings.FDBQUEUE = {"ENGINE": "foundationdb", "CLUSTER_FILE": str(cluster_file), "TIMEOUT": TIMEOUT}
    connection.reset_database()
    try:
        body = assert_unavailable(*timed(lambda: api.get("/api/queues/")))
        assert body["fdb_error"] in (1031, None)
    finally:
        connection.reset_database()
