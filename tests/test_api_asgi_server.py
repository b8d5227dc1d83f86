"""The demo under a real ASGI server (issue 30): gunicorn with uvicorn's worker on ``demo.asgi``.

The server is a child process on a free loopback port, on this test's store (either engine), its
API open to anonymous callers (so it needs none of the test's database rows), stopped in a
``finally``. Long-polling claims come from httpx's async client. A test knows the server has
parked them when its worker stops using CPU (``wait_idle``, bounded), never by sleeping.

* 50 parked claims: the worker's thread count does not grow with them (read from
  /proc/<pid>/status after its bounded pools have started), then 50 pushed items, one each.
* Clients that drop their connection at random moments (a seeded RNG) while items arrive at
  random moments: no item lost or delivered twice, and no lease left held by a client that went
  away beyond its claim's own (short) lease; a waiter that got its item extends its lease.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from django_fdbqueue import service

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = REPO_ROOT / "scripts" / "reliability"
sys.path.insert(0, str(SCRIPTS))

pytest.importorskip("uvicorn_worker", reason="the ASGI server is gunicorn with uvicorn's worker (the production extra)")
httpx = pytest.importorskip("httpx", reason="the clients use httpx (the test extra)")

import asgi_long_polls  # noqa: E402 - from scripts/reliability, after the path
import harness  # noqa: E402

pytestmark = pytest.mark.django_db
DEADLINE = 60.0
LEASE = 600
SHORT_LEASE = 5.0


@pytest.fixture
def asgi_server(fdbqueue_db, tmp_path, settings) -> Iterator[harness.Server]:
    """gunicorn + one uvicorn worker serving the demo's ASGI application on this test's store."""
    settings_dir = tmp_path / "server-settings"
    settings_dir.mkdir()
    fdbqueue = {
        **settings.FDBQUEUE,
        "PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
        "ACCESS": "authenticated",
    }
    (settings_dir / "asgi_test_settings.py").write_text(
        "from demo.settings import *  # noqa: F401,F403\n\n"
        "DEBUG = False\nALLOWED_HOSTS = ['127.0.0.1']\n"
        f"DATABASES = {{'default': {{'ENGINE': 'django.db.backends.sqlite3', 'NAME': {str(tmp_path / 'db.sqlite3')!r}}}}}\n"
        f"FDBQUEUE = {fdbqueue!r}\n",
        encoding="utf-8",
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "asgi_test_settings",
        "DEMO_THROTTLE": "off",
        "PYTHONPATH": os.pathsep.join(
            [str(settings_dir), str(REPO_ROOT / "demo_project"), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
        ),
    }
    port = harness.free_port()
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "demo.asgi:application",
        "-k",
        "uvicorn_worker.UvicornWorker",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "1",
        "--graceful-timeout",
        "5",
        "--log-level",
        "warning",
    ]
    with open(tmp_path / "server.out", "wb") as out, open(tmp_path / "server.err", "wb") as err:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=str(REPO_ROOT / "demo_project"),
            start_new_session=True,
        )
    server = harness.Server(
        harness.Child("gunicorn", process, tmp_path / "server.out", tmp_path / "server.err"), port, workers=1, threads=1
    )
    try:
        harness.wait_until(lambda: harness._answers(server), DEADLINE, "the ASGI server to answer")
        harness.wait_until(lambda: len(server.worker_pids()) == 1, DEADLINE, "its worker")
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(15)


def claims(server: harness.Server, count: int, lease: float, drops: list[float] | None = None) -> Any:
    """``count`` long-polling claims (wait 20) as tasks of the running loop; with ``drops``, the
    i-th client goes away (its connection closed) after drops[i] seconds unless it got an item."""
    client = httpx.AsyncClient(
        base_url=server.base_url,
        timeout=httpx.Timeout(45.0, connect=10.0),
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
    )

    async def one(index: int) -> dict | None:
        request = client.post("/api/queues/q/claim/", json={"wait": 20, "lease": lease})
        if drops is None:
            response = await request
        else:
            try:
                response = await asyncio.wait_for(request, drops[index])
            except asyncio.TimeoutError:
                return None  # gone
        assert response.status_code == 200, (response.status_code, response.content)
        body = response.json()
        if drops is not None:  # a live client keeps its item past the short lease
            extended = await client.post("/api/queues/q/extend/", json={"receipt": body["receipt"], "lease": LEASE})
            assert extended.status_code == 200, extended.content
        return body

    return client, [asyncio.ensure_future(one(index)) for index in range(count)]


def test_fifty_parked_claims_hold_no_thread_and_each_gets_one_item(asgi_server, fdbqueue_db):
    service.create_queue(fdbqueue_db, "q")
    asgi_long_polls.warm_pools(asgi_server, [{}], rounds=2, at_once=60, queue="q")
    before = asgi_long_polls.server_stats(asgi_server)["threads"]

    async def scenario() -> list[dict]:
        client, tasks = claims(asgi_server, 50, LEASE)
        try:
            await asyncio.get_running_loop().run_in_executor(None, asgi_long_polls.wait_idle, asgi_server)
            parked = asgi_long_polls.server_stats(asgi_server)["threads"]
            assert parked - before <= asgi_long_polls.pool_threads() < 50, (before, parked)  # bounded pools only
            for index in range(50):
                await service.apush(fdbqueue_db, "q", index)
            return await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE)
        finally:
            await client.aclose()

    bodies = asyncio.run(scenario())
    assert sorted(body["item"]["value"] for body in bodies) == list(range(50))
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.leased) == (0, 50)


def test_clients_that_drop_at_random_lose_no_item_and_leave_no_lease(asgi_server, fdbqueue_db):
    service.create_queue(fdbqueue_db, "q")
    rng = random.Random(30)
    drops = [rng.uniform(0.05, 1.5) for _ in range(40)]
    gaps = [rng.uniform(0.0, 0.1) for _ in range(20)]

    async def scenario() -> list[dict | None]:
        client, tasks = claims(asgi_server, 40, SHORT_LEASE, drops)
        try:
            for index, gap in enumerate(gaps):
                await asyncio.sleep(gap)  # the random moments of the pushes, not a synchronization
                await service.apush(fdbqueue_db, "q", index)
            return await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE)
        finally:
            await client.aclose()

    bodies = asyncio.run(scenario())
    live = [body["item"]["value"] for body in bodies if body is not None]
    asgi_long_polls.wait_idle(asgi_server)

    def settled() -> bool:
        """Only the live clients' leases are still running. A client that went away holds none
        beyond its claim's own short lease: the server gave the item back at once or, when the
        client left after its answer was on the way, the lease simply ends."""
        return held_leases(fdbqueue_db, "q") == len(live)

    harness.wait_until(settled, SHORT_LEASE + 15.0, "only the live clients' leases to be held")
    taken_back = drain(fdbqueue_db, "q")  # the ready items, and any lease that ran out
    assert sorted(live + taken_back) == list(range(20))  # none lost, none twice
    # No claim of a client that went away is still waiting on the server: new items stay queued.
    for index in range(20, 25):
        service.push(fdbqueue_db, "q", index)
    asgi_long_polls.wait_idle(asgi_server)
    assert sorted(drain(fdbqueue_db, "q")) == list(range(20, 25))
    assert held_leases(fdbqueue_db, "q") == len(live)


def held_leases(db: Any, name: str) -> int:
    """Leases still running now (one that ran out is not held, though it counts in ``leased``
    until a claim takes it back)."""
    now = dt.datetime.now(dt.timezone.utc)
    return sum(s.state == "leased" and s.visible_at > now for s in service.scheduled(db, name, limit=100).items)


def drain(db: Any, name: str) -> list[Any]:
    """Claim and ack everything claimable now, as a consumer would: the values taken."""
    taken = []
    while (lease := service.claim(db, name, lease=60)) is not None:
        service.ack(db, lease.receipt)
        taken.append(lease.item.value)
    return taken
