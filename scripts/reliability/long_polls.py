"""Long polls under WSGI: many waiting claimers must not lock the other clients out.

    .venv/bin/python scripts/reliability/long_polls.py                    # 64 waiters, 4x4 gthread
    .venv/bin/python scripts/reliability/long_polls.py --budget none      # no budget: the starvation
    .venv/bin/python scripts/reliability/long_polls.py --waiters 16 --workers 2 --threads 2 --json

The demo under gunicorn (gthread, 4 workers x 4 threads by default) on a free loopback port,
with the run's own database and store in a temp dir. ``--waiters`` clients, each with its own
API token, long-poll ``claim`` (``wait=20``) on an empty queue; a 204 with ``Retry-After`` (the
server's wait budget was spent) sends a waiter back after that many seconds, a plain 204 (its
wait ran out) at once. Meanwhile ``--others`` clients push to and GET another queue, back to
back, for ``--seconds``: their p50 and p99 are what the budget protects. Then the driver pushes
one item per waiter, one by one, and each waiter stops at its first item.

Checks (exit 1 if one fails): no 5xx and no request without an answer, every 204 that refused a
wait carried an integer ``Retry-After``, every pushed item went to exactly one waiter or is still
in the queue (none lost, none twice), gunicorn stopped gracefully. The goal (the others' p99
under 250 ms) and the timings are reported, not judged: they depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import Children, OpFigures, RunEnv, RunFailed, log  # noqa: E402

WAITS_QUEUE = "long.polls"
OTHERS_QUEUE = "long.others"
GOAL_P99_MS = 250.0
# How long the claims' leases last: past the end of the run, so a delivered item stays leased.
LEASE = 300


def add_load_arguments(parser: argparse.ArgumentParser, *, waiters: int, workers: int) -> None:
    """The options every long-poll load run takes (this one, and asgi_long_polls.py's)."""
    parser.add_argument("--waiters", type=int, default=waiters, help=f"Long-polling claimers (default {waiters}).")
    parser.add_argument("--others", type=int, default=8, help="Clients that push and GET (default 8).")
    parser.add_argument("--wait", type=float, default=20.0, help="Each claim's wait in seconds (default 20).")
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="Seconds the others run while the waiters wait (default 10)."
    )
    parser.add_argument("--workers", type=int, default=workers, help=f"gunicorn worker processes (default {workers}).")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_arguments(parser, waiters=64, workers=4)
    parser.add_argument("--threads", type=int, default=4, help="Threads per gunicorn worker (default 4).")
    parser.add_argument(
        "--budget",
        default=None,
        help="FDBQUEUE['WAIT_BUDGET'] per process, or 'none' for no limit (default: the app's).",
    )
    parser.add_argument("--json", action="store_true", help="Print the report as one JSON document.")
    parser.add_argument("--keep", action="store_true", help="Keep the run's directory.")
    args = parser.parse_args(argv)
    if args.waiters < 1 or args.others < 1 or args.seconds <= 0 or not 0 < args.wait <= 20:
        parser.error("--waiters and --others must be at least 1, --seconds positive, --wait in (0, 20]")
    if args.budget not in (None, "none") and not (args.budget.isdigit()):
        parser.error("--budget: a non-negative integer or 'none'")
    return args


class Waiter:
    """One long-polling claimer: claims until it gets an item or the run tells it to stop."""

    def __init__(self, base_url: str, header: dict[str, str], wait: float, stop: threading.Event) -> None:
        self.http = httpx.Client(base_url=base_url, headers=header, timeout=httpx.Timeout(wait + 30, connect=5.0))
        self.wait, self.stop = wait, stop
        self.item: Any = None
        self.statuses: dict[str, int] = {}
        self.retry_afters: list[str | None] = []
        self.first_sent = threading.Event()

    def claim_once(self) -> float:
        """One claim; the seconds to wait before the next one."""
        self.first_sent.set()
        try:
            response = self.http.post(f"/api/queues/{WAITS_QUEUE}/claim/", json={"wait": self.wait, "lease": LEASE})
        except httpx.HTTPError as error:
            self._count(type(error).__name__)
            return 1.0
        retry_after = response.headers.get("retry-after")
        refused = response.status_code == 204 and retry_after is not None
        self._count("204+Retry-After" if refused else str(response.status_code))
        if response.status_code == 200:
            self.item = response.json()["item"]["value"]["uid"]
        if refused:
            self.retry_afters.append(retry_after)
            return float(retry_after) if retry_after.isdigit() else 1.0
        return 0.0 if response.status_code in (200, 204) else 1.0

    def _count(self, status: str) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def run(self) -> None:
        try:
            while self.item is None and not self.stop.is_set():
                pause = self.claim_once()
                if pause:
                    self.stop.wait(pause)
        finally:
            self.http.close()


def run_others(base_url: str, headers: list[dict[str, str]], seconds: float) -> dict[str, OpFigures]:
    """Each client pushes, then GETs the queue, back to back, until the time is up."""
    figures = {"push": OpFigures(), "get": OpFigures()}
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def timed(client: httpx.Client, op: str, method: str, path: str, **kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            status: Any = client.request(method, path, **kwargs).status_code
        except httpx.HTTPError as error:
            status = type(error).__name__
        with lock:
            figures[op].add(status, (time.perf_counter() - started) * 1000)

    def client_main(header: dict[str, str]) -> None:
        with httpx.Client(base_url=base_url, headers=header, timeout=httpx.Timeout(60.0, connect=5.0)) as client:
            while time.monotonic() < stop_at:
                timed(client, "push", "POST", f"/api/queues/{OTHERS_QUEUE}/push/", json={"value": "other"})
                timed(client, "get", "GET", f"/api/queues/{OTHERS_QUEUE}/")

    threads = [threading.Thread(target=client_main, args=(header,), daemon=True) for header in headers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 130.0)  # two requests in flight at the end, each bounded by its timeout
    if any(thread.is_alive() for thread in threads):
        raise RunFailed("the other clients still ran long after their time")
    return figures


def push_items(base_url: str, header: dict[str, str], count: int, seconds: float) -> tuple[OpFigures, list[str]]:
    """One item per waiter, pushed one by one, for at most about ``seconds`` (a starved server
    may take a minute per push); the uids a 201 confirmed."""
    figures, uids = OpFigures(), []
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=base_url, headers=header, timeout=httpx.Timeout(60.0, connect=5.0)) as client:
        for index in range(count):
            if time.monotonic() > deadline:
                log(f"pushed {index} of {count} items in {seconds:g} s: giving up on the rest")
                break
            uid = f"item-{index}"
            started = time.perf_counter()
            try:
                status: Any = client.post(f"/api/queues/{WAITS_QUEUE}/push/", json={"value": {"uid": uid}}).status_code
            except httpx.HTTPError as error:
                status = type(error).__name__
            figures.add(status, (time.perf_counter() - started) * 1000)
            if status == 201:
                uids.append(uid)
    return figures, uids


def start_waiters(
    args: argparse.Namespace, base_url: str, headers: list[dict[str, str]], stop: threading.Event
) -> tuple[list[Waiter], list[threading.Thread]]:
    waiters = [Waiter(base_url, header, args.wait, stop) for header in headers]
    threads = [threading.Thread(target=waiter.run, daemon=True) for waiter in waiters]
    for thread in threads:
        thread.start()
    harness.wait_until(lambda: all(w.first_sent.is_set() for w in waiters), 30.0, "every waiter's first claim")
    return waiters, threads


def wait_for_deliveries(waiters: list[Waiter], expected: int, seconds: float) -> float | None:
    """Seconds until ``expected`` waiters held an item (None if they did not within ``seconds``)."""
    started = time.monotonic()
    deadline = started + seconds
    pause = threading.Event()
    while time.monotonic() < deadline:
        if sum(waiter.item is not None for waiter in waiters) >= expected:
            return time.monotonic() - started
        pause.wait(0.05)
    return None


def exercise(args: argparse.Namespace, server: Any, prefix: str, tokens: list[str]) -> dict[str, Any]:
    """Waiters park, the others run and are timed, then one item per waiter is pushed."""
    headers = [{"Authorization": f"{prefix} {token}"} for token in tokens]
    stop = threading.Event()
    waiters, threads = start_waiters(args, server.base_url, headers[: args.waiters], stop)
    try:
        log(f"{args.waiters} waiters parked; {args.others} other clients for {args.seconds:g} s")
        others = run_others(server.base_url, headers[args.waiters :], args.seconds)
        parked = {status: sum(w.statuses.get(status, 0) for w in waiters) for status in ("204+Retry-After", "204")}
        log(f"pushing {args.waiters} items one by one")
        pushes, uids = push_items(server.base_url, headers[-1], args.waiters, 3 * args.wait)
        after_last_push = wait_for_deliveries(waiters, len(uids), args.wait + 15.0) if uids else None
    finally:
        stop.set()
        for thread in threads:
            thread.join(args.wait + 40.0)  # a claim in flight ends within its wait and its timeout
    if any(thread.is_alive() for thread in threads):
        raise RunFailed("a waiter still ran long after the run told it to stop")
    return {
        "waiters": waiters,
        "others": others,
        "pushes": pushes,
        "uids": uids,
        "during_others": parked,
        "delivered_after_last_push_s": after_last_push,
    }


def account(uids: list[str], waiters: list[Waiter]) -> dict[str, Any]:
    """Every pushed item is with exactly one waiter, or still in the queue for the next claim:
    ready, or under a lease that ran out (a client that went away after its answer was on the way
    held it for the claim's own lease). ``leased`` counts the leases still running."""
    from django_fdbqueue import service
    from django_fdbqueue.connection import get_database

    db = get_database()
    delivered = [waiter.item for waiter in waiters if waiter.item is not None]
    ready = [item.value["uid"] for item in _every(service.browse, db)]
    now = dt.datetime.now(dt.timezone.utc)
    leases = [entry for entry in _every(service.scheduled, db) if entry.state == "leased"]
    ready += [entry.item.value["uid"] for entry in leases if entry.visible_at <= now]
    seen = delivered + ready
    return {
        "pushed": len(uids),
        "delivered": len(delivered),
        "still_queued": len(ready),
        "leased": sum(entry.visible_at > now for entry in leases),
        "twice": sorted({uid for uid in seen if seen.count(uid) > 1}),
        "lost": sorted(set(uids) - set(seen)),
        "unknown": sorted(set(seen) - set(uids)),
    }


def _every(read: Any, db: Any) -> list[Any]:
    """Every entry of a paged read of the waiters' queue (``service.browse`` or ``scheduled``)."""
    entries, cursor = [], None
    while True:
        page = read(db, WAITS_QUEUE, cursor=cursor, limit=100)
        entries += page.items
        cursor = page.next_cursor
        if cursor is None:
            return entries


def checks_of(result: dict[str, Any], accounting: dict[str, Any], stop_code: int | None) -> list[dict[str, Any]]:
    waiters: list[Waiter] = result["waiters"]
    statuses = merged(
        [w.statuses for w in waiters] + [f.statuses for f in result["others"].values()] + [result["pushes"].statuses]
    )
    answered = ("200", "201", "204", "204+Retry-After")
    bad = {status: count for status, count in statuses.items() if status not in answered}
    retry_afters = [value for w in waiters for value in w.retry_afters]
    bad_retry = [value for value in retry_afters if not (value or "").isdigit()]
    return [
        {"name": "no 5xx, every request answered", "ok": not bad, "detail": f"{bad}" if bad else "none"},
        {
            "name": "every refused wait says when to retry",
            "ok": not bad_retry,
            "detail": f"{len(retry_afters)} 204 with Retry-After" + (f", bad: {bad_retry[:5]}" if bad_retry else ""),
        },
        {
            "name": "every pushed item with exactly one waiter or still queued",
            "ok": not (accounting["twice"] or accounting["lost"] or accounting["unknown"])
            and accounting["leased"] == accounting["delivered"]
            and accounting["pushed"] == len(waiters),
            "detail": f"pushed {accounting['pushed']}, delivered {accounting['delivered']} (leased "
            f"{accounting['leased']}), still queued {accounting['still_queued']}, lost {len(accounting['lost'])}, "
            f"twice {len(accounting['twice'])}",
        },
        {"name": "gunicorn stopped gracefully", "ok": stop_code == 0, "detail": f"exit {stop_code}"},
    ]


def merged(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for each in counts:
        for key, value in each.items():
            total[key] = total.get(key, 0) + value
    return dict(sorted(total.items()))


def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    if args.budget is not None:
        os.environ["FDBQUEUE_LOAD_WAIT_BUDGET"] = args.budget  # read by settings_load in every process
    env = RunEnv(directory)
    harness.setup_django(env)
    from django_fdbqueue import service
    from django_fdbqueue.conf import get_settings
    from django_fdbqueue.connection import get_database

    service.create_queue(get_database(), WAITS_QUEUE)
    service.create_queue(get_database(), OTHERS_QUEUE)
    budget = get_settings().wait_budget
    prefix, tokens = harness.make_user_and_tokens(args.waiters + args.others)
    with Children(directory) as children:
        server = harness.start_server(children, env, workers=args.workers, threads=args.threads)
        log(f"gunicorn on {server.base_url}: {args.workers} workers x {args.threads} threads, wait budget {budget}")
        harness.warm_up(server, {"Authorization": f"{prefix} {tokens[0]}"})
        result = exercise(args, server, prefix, tokens)
        stop_code = server.child.stop(30.0)
    return report_of(args, budget, result, account(result["uids"], result["waiters"]), stop_code)


def report_of(
    args: argparse.Namespace,
    budget: int | None,
    result: dict[str, Any],
    accounting: dict[str, Any],
    stop_code: int | None,
) -> dict[str, Any]:
    others = OpFigures()
    for figures in result["others"].values():
        others.latencies_ms += figures.latencies_ms
        others.statuses = merged([others.statuses, figures.statuses])
    waiters: list[Waiter] = result["waiters"]
    summary = others.summary(args.seconds)
    checks = checks_of(result, accounting, stop_code)
    return {
        "config": {
            "waiters": args.waiters,
            "others": args.others,
            "wait_s": args.wait,
            "seconds": args.seconds,
            "gunicorn_workers": args.workers,
            "gunicorn_threads": args.threads,
            "wait_budget": budget,
        },
        "others": {"all": summary, **{op: f.summary(args.seconds) for op, f in result["others"].items()}},
        "goal": {
            "others_p99_ms_below": GOAL_P99_MS,
            "met": summary["p99_ms"] is not None and summary["p99_ms"] < GOAL_P99_MS,
        },
        "waiters": {
            "answers_while_others_ran": result["during_others"],
            "answers": merged([w.statuses for w in waiters]),
            "ever_refused": sum(bool(w.retry_afters) for w in waiters),
            "got_an_item": sum(w.item is not None for w in waiters),
        },
        "item_pushes": result["pushes"].summary(1.0),
        "all_delivered_s_after_pushes": None
        if result["delivered_after_last_push_s"] is None
        else round(result["delivered_after_last_push_s"], 2),
        "accounting": accounting,
        "checks": checks,
        "ok": all(check["ok"] for check in checks),
    }


def render(report: dict[str, Any]) -> str:
    config, waiters = report["config"], report["waiters"]
    lines = [
        f"Long polls under WSGI: {config['waiters']} waiters (claim wait={config['wait_s']:g}), "
        f"{config['others']} other clients for {config['seconds']:g} s, gunicorn gthread "
        f"{config['gunicorn_workers']}x{config['gunicorn_threads']}, wait budget {config['wait_budget']} "
        "per process",
        "",
    ]
    rows = [
        (
            op,
            f["requests"],
            f["requests_per_s"],
            f["p50_ms"],
            f["p99_ms"],
            ", ".join(f"{status}: {count}" for status, count in f["statuses"].items()),
        )
        for op, f in report["others"].items()
    ]
    lines.append(harness.table(rows, ("others", "requests", "req/s", "p50 ms", "p99 ms", "statuses")))
    goal = report["goal"]
    lines += [
        "",
        f"goal: the others' p99 < {goal['others_p99_ms_below']:g} ms: {'met' if goal['met'] else 'NOT met'}",
        f"waiters' answers while the others ran: {waiters['answers_while_others_ran']}",
        f"waiters' answers in all: {waiters['answers']}",
        f"waiters ever refused a wait: {waiters['ever_refused']}; got an item: {waiters['got_an_item']}",
        f"{report['accounting']['pushed']} items pushed one by one: p50 {report['item_pushes']['p50_ms']} ms, "
        f"p99 {report['item_pushes']['p99_ms']} ms; all delivered "
        f"{report['all_delivered_s_after_pushes']} s after the last push",
        "",
    ]
    return "\n".join(lines + harness.verdicts(report))


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, parse_args, run, render, stop_on_term=True)


if __name__ == "__main__":
    sys.exit(main())
