"""Long polls under ASGI: 1,000 waiting claimers hold no server thread and lock nobody out.

    .venv/bin/python scripts/reliability/asgi_long_polls.py                   # 1,000 waiters, 2 workers
    .venv/bin/python scripts/reliability/asgi_long_polls.py --disconnect 100  # clients that drop at random
    .venv/bin/python scripts/reliability/asgi_long_polls.py --waiters 50 --seconds 3 --json

The demo as docs/howto/production.md deploys it for ASGI (gunicorn with uvicorn's worker,
``demo.asgi``), on a free loopback port, with the run's own database and store in a temp dir.
``--waiters`` clients (httpx, async, one connection and one API token each) long-poll ``claim``
(``wait=20``) on an empty queue; once the server's workers are idle (every waiter parked), the
``--others`` clients push and GET another queue for ``--seconds`` (their p50 and p99; goal p99
< 100 ms, as long_polls.py measures under WSGI). Then one item per waiter is pushed, one by one:
each waiter stops at its first item. Reported: the time from the last push's answer to the last
delivery (goal < 2 s), each item's wake-up (delivery minus its push's answer; goal p99 < 100 ms),
the server's threads and RSS before and while the waiters were parked (goal < 50 kB a waiter).

``--disconnect N``: N waiters each drop their connection at a random moment (``--seed``) while
items are pushed at random moments; a waiter that got an item first keeps it. Then: no item lost
or delivered twice, and no lease held by a client that went away (the server cancels the wait
and gives back what its commit took).

Checks (exit 1 if one fails): no 5xx, every pushed item with exactly one live waiter or still in
the queue, the server's thread count did not grow with the waiters, gunicorn stopped gracefully.
Timings are reported against their goals, not judged: they depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
import long_polls  # noqa: E402
from harness import Children, OpFigures, RunEnv, RunFailed, log  # noqa: E402
from long_polls import OTHERS_QUEUE, WAITS_QUEUE  # noqa: E402

GOALS = {"others_p99_ms": 100.0, "last_delivery_s": 2.0, "wake_up_p99_ms": 100.0, "rss_per_waiter_kb": 50.0}


def pool_threads() -> int:
    """Threads one worker may start as it gets busy, whatever the waiters: its ASGI lanes and the
    async service's pool (both bounded, started lazily). More than that would be a thread a waiter."""
    from django_fdbqueue.asgi import LANES
    from django_fdbqueue.service._internals.offload import POOL_THREADS

    return LANES + POOL_THREADS


#: The disconnect mode's claims: short leases, so a lease held by nobody ends within the run (a
#: waiter that got its item extends its lease at once).
DISCONNECT_LEASE = 10.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    long_polls.add_load_arguments(parser, waiters=1000, workers=2)
    parser.add_argument(
        "--disconnect",
        type=int,
        default=0,
        metavar="N",
        help="Instead: N waiters that drop their connection at random moments.",
    )
    parser.add_argument("--seed", type=int, default=30, help="Random seed of --disconnect (default 30).")
    parser.add_argument("--json", action="store_true", help="Print the report as one JSON document.")
    parser.add_argument("--keep", action="store_true", help="Keep the run's directory.")
    args = parser.parse_args(argv)
    if args.waiters < 1 or args.others < 1 or args.seconds <= 0 or not 0 < args.wait <= 20 or args.disconnect < 0:
        parser.error("--waiters and --others at least 1, --seconds positive, --wait in (0, 20], --disconnect >= 0")
    return args


# -- the server's processes ----------------------------------------------------------------------


def server_stats(server: harness.Server) -> dict[str, int]:
    """Threads, RSS (kB) and CPU ticks of the server's worker processes, summed."""
    total = {"threads": 0, "rss_kb": 0, "cpu_ticks": 0}
    for pid in server.worker_pids():
        try:
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status if ":" in line)
        total["threads"] += int(fields["Threads"])
        total["rss_kb"] += int(fields["VmRSS"].split()[0])
        total["cpu_ticks"] += int(stat[11]) + int(stat[12])  # utime, stime
    return total


def wait_idle(server: harness.Server, seconds: float = 60.0) -> None:
    """Until the workers use (almost) no CPU for 0.3 s: every request in hand is parked or done."""
    deadline = time.monotonic() + seconds
    pause = threading.Event()
    before = server_stats(server)["cpu_ticks"]
    while time.monotonic() < deadline:
        pause.wait(0.3)
        now = server_stats(server)["cpu_ticks"]
        if now - before <= 2:
            return
        before = now
    raise RunFailed(f"the server was still busy after {seconds:g} s")


# -- the waiters, on an event loop of their own ---------------------------------------------------


class Waiter:
    """One long-polling claimer on its own connection; ``drop_after`` seconds, if set, it goes away."""

    def __init__(self, header: dict[str, str], wait: float, lease: float, drop_after: float | None = None) -> None:
        self.header, self.wait, self.lease, self.drop_after = header, wait, lease, drop_after
        self.item: Any = None
        self.received_at: float | None = None
        self.statuses: dict[str, int] = {}
        self.sent = False
        self.dropped = False

    async def run(self, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        while self.item is None and not stop.is_set():
            self.sent = True
            try:
                response = await client.post(
                    f"/api/queues/{WAITS_QUEUE}/claim/",
                    headers=self.header,
                    json={"wait": self.wait, "lease": self.lease},
                )
            except httpx.HTTPError as error:
                self._count(type(error).__name__)
                await asyncio.sleep(1.0)
                continue
            self._count(str(response.status_code))
            if response.status_code == 200:
                body = response.json()
                self.item, self.received_at = body["item"]["value"]["uid"], time.monotonic()
                if self.drop_after is not None:  # a live client: it keeps its item past the short lease
                    await client.post(
                        f"/api/queues/{WAITS_QUEUE}/extend/",
                        headers=self.header,
                        json={"receipt": body["receipt"], "lease": long_polls.LEASE},
                    )
            elif response.status_code != 204:
                await asyncio.sleep(1.0)

    def _count(self, status: str) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1


class WaiterLoop:
    """The waiters' event loop in a thread: start them, then stop (cancel) the ones still waiting."""

    def __init__(self, base_url: str, waiters: list[Waiter], wait: float) -> None:
        self.waiters, self.base_url, self.wait = waiters, base_url, wait
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.stop_event: asyncio.Event | None = None
        self.done: asyncio.Future | None = None

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)
        harness.wait_until(lambda: all(w.sent for w in self.waiters), 60.0, "every waiter's first claim")

    async def _start(self) -> None:
        self.stop_event = asyncio.Event()
        # A client (so a connection pool) per waiter: one pool of 1,000 busy connections costs
        # httpx time in proportion to their number at every answer, and the driver falls behind.
        self.clients = [
            httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(self.wait + 30, connect=30.0))
            for _ in self.waiters
        ]
        self.tasks = [asyncio.ensure_future(self._one(w, c)) for w, c in zip(self.waiters, self.clients)]

    async def _one(self, waiter: Waiter, client: httpx.AsyncClient) -> None:
        task = asyncio.ensure_future(waiter.run(client, self.stop_event))
        if waiter.drop_after is None:
            return await task
        done, _ = await asyncio.wait({task}, timeout=waiter.drop_after)
        if not done:
            waiter.dropped = True
            task.cancel()  # closes its connection mid-request: the server sees a disconnect
            await asyncio.gather(task, return_exceptions=True)

    def finish(self, seconds: float) -> None:
        """Cancel whoever still waits (a disconnect each), close the client, stop the loop."""

        async def _finish() -> None:
            self.stop_event.set()
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await asyncio.gather(*(client.aclose() for client in self.clients))

        asyncio.run_coroutine_threadsafe(_finish(), self.loop).result(seconds)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(seconds)


def push_timed(
    base_url: str,
    header: dict[str, str],
    uids: list[str],
    gaps: list[float] | None = None,
) -> tuple[OpFigures, dict[str, float]]:
    """Push one item per uid, one by one (after ``gaps`` seconds each, if given); each 201's answer time."""
    figures, answered = OpFigures(), {}
    pause = threading.Event()
    with httpx.Client(base_url=base_url, headers=header, timeout=httpx.Timeout(60.0, connect=5.0)) as client:
        for index, uid in enumerate(uids):
            if gaps:
                pause.wait(gaps[index])
            started = time.perf_counter()
            try:
                status: Any = client.post(f"/api/queues/{WAITS_QUEUE}/push/", json={"value": {"uid": uid}}).status_code
            except httpx.HTTPError as error:
                status = type(error).__name__
            figures.add(status, (time.perf_counter() - started) * 1000)
            if status == 201:
                answered[uid] = time.monotonic()
    return figures, answered


# -- the two runs --------------------------------------------------------------------------------


def warm_pools(
    server: harness.Server,
    headers: list[dict[str, str]],
    rounds: int = 3,
    at_once: int = 100,
    queue: str = OTHERS_QUEUE,
) -> None:
    """Bursts of claims that do not wait, so each worker's bounded pools (its ASGI lanes, the async
    service's threads) have started all their threads before the count the waiters are held to."""

    async def burst() -> None:
        async with httpx.AsyncClient(
            base_url=server.base_url, timeout=60.0, limits=httpx.Limits(max_connections=None)
        ) as client:
            for _ in range(rounds):
                await asyncio.gather(
                    *(
                        client.post(f"/api/queues/{queue}/claim/", json={"wait": 0}, headers=headers[i % len(headers)])
                        for i in range(at_once)
                    )
                )

    asyncio.run(burst())
    wait_idle(server)


def exercise(args: argparse.Namespace, server: harness.Server, headers: list[dict[str, str]]) -> dict[str, Any]:
    """Waiters park; the others run and are timed; then one item per waiter."""
    warm_pools(server, headers)
    before = server_stats(server)
    waiters = [Waiter(header, args.wait, long_polls.LEASE) for header in headers[: args.waiters]]
    loop = WaiterLoop(server.base_url, waiters, args.wait)
    loop.start()
    try:
        wait_idle(server)
        parked = server_stats(server)
        log(f"{args.waiters} waiters parked; {args.others} other clients for {args.seconds:g} s")
        others = long_polls.run_others(server.base_url, headers[args.waiters :], args.seconds)
        during = server_stats(server)
        log(f"pushing {args.waiters} items one by one")
        pushes, answered = push_timed(server.base_url, headers[-1], [f"item-{i}" for i in range(args.waiters)])
        harness.wait_until(
            lambda: sum(w.item is not None for w in waiters) >= len(answered),
            args.wait + 15.0,
            "every pushed item to reach a waiter",
        )
    finally:
        loop.finish(args.wait + 40.0)
    return {
        "waiters": waiters,
        "others": others,
        "pushes": pushes,
        "answered": answered,
        "server": {"before": before, "parked": parked, "during_others": during},
    }


def exercise_disconnects(
    args: argparse.Namespace, server: harness.Server, headers: list[dict[str, str]]
) -> dict[str, Any]:
    """Waiters that drop at random moments while items arrive at random moments."""
    rng = random.Random(args.seed)
    count = args.disconnect
    warm_pools(server, headers)
    before = server_stats(server)
    waiters = [
        Waiter(headers[i % len(headers)], args.wait, DISCONNECT_LEASE, rng.uniform(0.05, 2.0)) for i in range(count)
    ]
    items = max(1, count // 2)
    gaps = [rng.uniform(0.0, 2.0 / items) for _ in range(items)]
    loop = WaiterLoop(server.base_url, waiters, args.wait)
    loop.start()
    try:
        pushes, answered = push_timed(server.base_url, headers[-1], [f"item-{i}" for i in range(items)], gaps)
        harness.wait_until(
            lambda: all(w.dropped or w.item is not None for w in waiters), 30.0, "every waiter to drop or get an item"
        )
    finally:
        loop.finish(args.wait + 40.0)
    wait_idle(server)
    first = long_polls.account(list(answered), waiters)
    started = time.monotonic()
    harness.wait_until(
        lambda: _settled(list(answered), waiters),
        DISCONNECT_LEASE + 15.0,
        "the store to hold only the live waiters' leases",
    )
    return {
        "waiters": waiters,
        "pushes": pushes,
        "answered": answered,
        "first_look": first,
        "settled_after_s": round(time.monotonic() - started, 2),
        "server": {"before": before, "parked": server_stats(server), "during_others": server_stats(server)},
    }


def _settled(uids: list[str], waiters: list[Waiter]) -> bool:
    accounting = long_polls.account(uids, waiters)
    return accounting["leased"] == accounting["delivered"]


# -- the report ----------------------------------------------------------------------------------


def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    env = RunEnv(directory)
    harness.setup_django(env)
    from django_fdbqueue import service
    from django_fdbqueue.connection import get_database

    service.create_queue(get_database(), WAITS_QUEUE)
    service.create_queue(get_database(), OTHERS_QUEUE)
    clients = args.disconnect or args.waiters
    prefix, tokens = harness.make_user_and_tokens(clients + args.others)
    headers = [{"Authorization": f"{prefix} {token}"} for token in tokens]
    with Children(directory) as children:
        server = harness.start_server(children, env, workers=args.workers, threads=1, kind="asgi")
        log(f"gunicorn + uvicorn worker on {server.base_url}: {args.workers} workers (demo.asgi)")
        harness.warm_up(server, headers[0])
        result = (exercise_disconnects if args.disconnect else exercise)(args, server, headers)
        stop_code = server.child.stop(30.0)
    uids = list(result["answered"])
    return report_of(args, result, long_polls.account(uids, result["waiters"]), stop_code)


def figures_of(args: argparse.Namespace, result: dict[str, Any]) -> dict[str, Any]:
    waiters: list[Waiter] = result["waiters"]
    answered: dict[str, float] = result["answered"]
    received = {w.item: w.received_at for w in waiters if w.item is not None and w.received_at is not None}
    wake_ms = [max(0.0, (received[uid] - answered[uid]) * 1000) for uid in answered if uid in received]
    last = max(received.values()) - max(answered.values()) if received and answered else None
    server = result["server"]
    grown_kb = server["parked"]["rss_kb"] - server["before"]["rss_kb"]
    return {
        "last_delivery_after_last_push_s": None if last is None else round(max(0.0, last), 3),
        "wake_up_p50_ms": _round(harness.percentile(wake_ms, 0.5)),
        "wake_up_p99_ms": _round(harness.percentile(wake_ms, 0.99)),
        "server_threads": {key: server[key]["threads"] for key in ("before", "parked", "during_others")},
        "server_rss_kb": {key: server[key]["rss_kb"] for key in ("before", "parked", "during_others")},
        "rss_per_waiter_kb": round(grown_kb / max(1, len(waiters)), 2),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def report_of(
    args: argparse.Namespace, result: dict[str, Any], accounting: dict[str, Any], stop_code: int | None
) -> dict[str, Any]:
    """The run's report: its figures against their goals, and its checks.

    Long: one flat list of checks, each a few lines, read top to bottom as the report prints them.
    """
    waiters: list[Waiter] = result["waiters"]
    others = OpFigures()
    for figures in result.get("others", {}).values():
        others.latencies_ms += figures.latencies_ms
        others.statuses = long_polls.merged([others.statuses, figures.statuses])
    figures = figures_of(args, result)
    statuses = long_polls.merged([w.statuses for w in waiters] + [others.statuses, result["pushes"].statuses])
    bad = {s: n for s, n in statuses.items() if s not in ("200", "201", "204")}
    live = sum(w.item is not None for w in waiters)
    threads = figures["server_threads"]
    checks = [
        {"name": "no 5xx, every request answered", "ok": not bad, "detail": f"{bad}" if bad else "none"},
        {
            "name": "every pushed item with exactly one live waiter or still queued",
            "ok": not (accounting["twice"] or accounting["lost"] or accounting["unknown"])
            and accounting["leased"] == accounting["delivered"] == live,
            "detail": f"pushed {accounting['pushed']}, delivered {accounting['delivered']} (leased "
            f"{accounting['leased']}), still queued {accounting['still_queued']}, lost {len(accounting['lost'])}, "
            f"twice {len(accounting['twice'])}",
        },
        {
            "name": "the server's threads did not grow with the waiters",
            "ok": threads["parked"] - threads["before"] <= args.workers * pool_threads(),
            "detail": f"{threads['before']} before, {threads['parked']} with {len(waiters)} waiters parked (bounded "
            f"pools: at most {pool_threads()} more a worker)",
        },
        {"name": "gunicorn stopped gracefully", "ok": stop_code == 0, "detail": f"exit {stop_code}"},
    ]
    report: dict[str, Any] = {
        "config": {
            "waiters": len(waiters),
            "others": args.others,
            "wait_s": args.wait,
            "seconds": args.seconds,
            "workers": args.workers,
            "disconnect": args.disconnect,
            "seed": args.seed,
        },
        "others": {
            "all": others.summary(args.seconds),
            **{op: f.summary(args.seconds) for op, f in result.get("others", {}).items()},
        },
        "figures": figures,
        "goals": GOALS,
        "item_pushes": result["pushes"].summary(1.0),
        "waiters": {
            "answers": long_polls.merged([w.statuses for w in waiters]),
            "got_an_item": live,
            "dropped": sum(w.dropped for w in waiters),
        },
        "accounting": accounting,
        "checks": checks,
        "ok": all(check["ok"] for check in checks),
    }
    if args.disconnect:
        first = result["first_look"]
        report["disconnects"] = {
            "leases_held_by_gone_clients_at_first_look": first["leased"] - first["delivered"],
            "settled_after_s": result["settled_after_s"],
        }
    return report


def render(report: dict[str, Any]) -> str:
    config, figures, goals = report["config"], report["figures"], report["goals"]
    lines = [
        f"Long polls under ASGI: {config['waiters']} waiters (claim wait={config['wait_s']:g}), "
        f"gunicorn + uvicorn worker x {config['workers']}"
        + (
            f", {config['disconnect']} dropping at random (seed {config['seed']})"
            if config["disconnect"]
            else f", {config['others']} other clients for {config['seconds']:g} s"
        ),
        "",
    ]
    if not config["disconnect"]:
        rows = [
            (
                op,
                f["requests"],
                f["requests_per_s"],
                f["p50_ms"],
                f["p99_ms"],
                ", ".join(f"{s}: {n}" for s, n in f["statuses"].items()),
            )
            for op, f in report["others"].items()
        ]
        lines += [
            harness.table(rows, ("others", "requests", "req/s", "p50 ms", "p99 ms", "statuses")),
            "",
            f"others' p99: {report['others']['all']['p99_ms']} ms (goal < {goals['others_p99_ms']:g})",
            f"last delivery {figures['last_delivery_after_last_push_s']} s after the last push's answer "
            f"(goal < {goals['last_delivery_s']:g})",
            f"wake-up p50 {figures['wake_up_p50_ms']} ms, p99 {figures['wake_up_p99_ms']} ms "
            f"(goal p99 < {goals['wake_up_p99_ms']:g})",
        ]
    else:
        dis = report["disconnects"]
        lines += [
            f"waiters dropped: {report['waiters']['dropped']}; got an item: {report['waiters']['got_an_item']}",
            f"leases held by gone clients at the first look: {dis['leases_held_by_gone_clients_at_first_look']}; "
            f"settled after {dis['settled_after_s']} s (claims' lease {DISCONNECT_LEASE:g} s)",
        ]
    threads, rss = figures["server_threads"], figures["server_rss_kb"]
    lines += [
        f"server threads: {threads['before']} before, {threads['parked']} with the waiters parked, "
        f"{threads['during_others']} while the others ran",
        f"server RSS: {rss['before']} kB before, {rss['parked']} kB parked: {figures['rss_per_waiter_kb']} kB "
        f"per waiter (goal < {goals['rss_per_waiter_kb']:g})",
        f"item pushes: p50 {report['item_pushes']['p50_ms']} ms, p99 {report['item_pushes']['p99_ms']} ms",
        "",
    ]
    return "\n".join(lines + harness.verdicts(report))


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, parse_args, run, render, stop_on_term=True)


if __name__ == "__main__":
    sys.exit(main())
