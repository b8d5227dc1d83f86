"""What API authentication costs: the same requests with an API token, a session cookie, and HTTP basic.

    .venv/bin/python scripts/reliability/auth_cost.py                  # 8 s per method
    .venv/bin/python scripts/reliability/auth_cost.py --seconds 2 --json

The demo under gunicorn (4 workers by default) on a free loopback port, with the run's own
database and store in a temp dir; 16 client threads, each sending ``GET /api/queues/<name>/``
back to back for a few seconds, once per authentication method:

- ``token``: ``Authorization: Token ...`` (django-rest-knox): one indexed lookup and a SHA-512.
  The run's user is a superuser, so the queue grants (``django_fdbqueue.access``) are not consulted.
- ``grants``: the same, as a user who is not a superuser, with ten queue grants (one of them
  ``view`` on ``auth.*``) and tokens scoped to ``view:auth.*``: every request checks the grants and
  the scope. ``token rate / grants rate`` is what the check costs.
- ``session``: the cookie of one login through the admin's login form, shared by the clients.
- ``basic``: ``curl -u user:password`` style. Every request runs Django's password hasher
  (PBKDF2, about a quarter of a second of CPU by design), so this is the slow one.

It prints requests/s, p50 and p99 for each, and how many times slower than tokens each is. Every
answer must be a 200 (exit code 1 otherwise); the timings are reported, never judged.

``--rounds N`` measures what the grants check costs more closely: after the methods, N more
rounds of ``token`` and ``grants`` windows, back to back and in alternating order (so a drift of the
machine's load weighs on both), and the median of the rounds' ``grants rate / token rate``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import Children, OpFigures, RunEnv, RunFailed, log  # noqa: E402

QUEUE = "auth.cost"
METHODS = ("token", "grants", "session", "basic")
GRANTED_USER = "load-granted"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="Seconds of requests per method (default 8).")
    parser.add_argument("--clients", type=int, default=16, help="Concurrent client threads (default 16).")
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes (default 4).")
    parser.add_argument("--threads", type=int, default=4, help="Threads per gunicorn worker (default 4).")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"Which, in order (default {','.join(METHODS)}).")
    parser.add_argument(
        "--rounds",
        type=int,
        default=0,
        help="Alternating token/grants rounds after the methods, for the grants check's cost (default 0).",
    )
    parser.add_argument("--json", action="store_true", help="Print the report as one JSON document.")
    parser.add_argument("--keep", action="store_true", help="Keep the run's directory.")
    args = parser.parse_args(argv)
    args.methods = [method.strip() for method in args.methods.split(",") if method.strip()]
    if not args.methods or set(args.methods) - set(METHODS):
        parser.error(f"--methods: choose from {', '.join(METHODS)}")
    if args.seconds <= 0 or args.clients < 1 or args.rounds < 0:
        parser.error("--seconds and --clients must be positive")
    return args


def session_cookie(base_url: str) -> str:
    """Log in once through the admin's login form, as a browser does; the session id."""
    with httpx.Client(base_url=base_url, timeout=60.0) as client:
        page = client.get("/admin/login/")
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        if page.status_code != 200 or match is None:
            raise RunFailed(f"the admin's login page answered {page.status_code} without a CSRF token")
        answer = client.post(
            "/admin/login/?next=/admin/",
            data={
                "csrfmiddlewaretoken": match.group(1),
                "username": harness.LOAD_USER,
                "password": harness.LOAD_PASSWORD,
                "next": "/admin/",
            },
        )
        session = client.cookies.get("sessionid")
        if answer.status_code != 302 or not session:
            raise RunFailed(f"logging in answered {answer.status_code} without a session cookie")
        return session


def make_granted_tokens(count: int) -> list[str]:
    """``count`` scoped tokens of a user who may only view ``auth.*``, among grants on other queues."""
    from django.contrib.auth import get_user_model

    from django_fdbqueue.models import QueueGrant
    from django_fdbqueue.tokens import service as tokens

    user, _ = get_user_model().objects.get_or_create(username=GRANTED_USER)
    QueueGrant.objects.create(user=user, pattern="auth.*", actions="view")
    for n in range(9):
        QueueGrant.objects.create(user=user, pattern=f"other{n}.*", actions="view,push,consume")
    return [tokens.create_token(user, scope=["view:auth.*"], expiry=None)[1] for _ in range(count)]


def measure(base_url: str, setups: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Each client thread sends requests with its own credentials until the time is up."""
    figures = OpFigures()
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    finished: list[float] = []

    def client_main(setup: dict[str, Any]) -> None:
        with httpx.Client(base_url=base_url, timeout=httpx.Timeout(120.0, connect=5.0), **setup) as client:
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                try:
                    status: Any = client.get(f"/api/queues/{QUEUE}/").status_code
                except httpx.HTTPError as error:
                    status = type(error).__name__
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    figures.add(status, elapsed)
        with lock:
            finished.append(time.monotonic())

    started = time.monotonic()
    threads = [threading.Thread(target=client_main, args=(setup,), daemon=True) for setup in setups]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 180.0)  # an in-flight request may take a while; never forever
    if any(thread.is_alive() for thread in threads):
        raise RunFailed("client threads still running long after their time")
    # Requests end after the deadline too: the rate is over the time until the last one ended.
    return figures.summary(max(finished) - started)


def clients_of(method: str, prefix: str, tokens: list[str], session: str, clients: int) -> list[dict[str, Any]]:
    """How each client of ``method`` authenticates: a token each, the shared session, or basic."""
    if method in ("token", "grants"):
        return [{"headers": {"Authorization": f"{prefix} {token}"}} for token in tokens]
    if method == "session":
        return [{"cookies": {"sessionid": session}} for _ in range(clients)]
    return [{"auth": (harness.LOAD_USER, harness.LOAD_PASSWORD)} for _ in range(clients)]


def run(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    env = RunEnv(directory)
    harness.setup_django(env)
    from django_fdbqueue import service
    from django_fdbqueue.connection import get_database

    service.create_queue(get_database(), QUEUE)
    prefix, tokens = harness.make_user_and_tokens(args.clients)
    granted = make_granted_tokens(args.clients)
    results: dict[str, Any] = {}
    with Children(directory) as children:
        server = harness.start_server(children, env, workers=args.workers, threads=args.threads)
        log(f"gunicorn on {server.base_url}: {args.workers} workers x {args.threads} threads")
        harness.warm_up(server, {"Authorization": f"{prefix} {tokens[0]}"})
        session = session_cookie(server.base_url)
        # Unmeasured: the first requests of each worker process import and connect what the rest
        # reuse, which would otherwise count against whichever method comes first.
        measure(
            server.base_url,
            [{"headers": {"Authorization": f"{prefix} {token}"}} for token in tokens],
            min(1.5, args.seconds),
        )
        for method in args.methods:
            setups = clients_of(method, prefix, tokens if method == "token" else granted, session, args.clients)
            log(f"{method}: {args.clients} clients for {args.seconds:g} s")
            results[method] = measure(server.base_url, setups, args.seconds)
        rounds = alternate(server.base_url, prefix, tokens, granted, args) if args.rounds else None
        code = server.child.stop(30.0)
    base = results.get("token", {}).get("requests_per_s")
    for figures in results.values():
        rate = figures["requests_per_s"]
        figures["token_rate_divided_by_this"] = round(base / rate, 1) if base and rate else None
    bad = {
        method: {status: count for status, count in figures["statuses"].items() if status != "200"}
        for method, figures in results.items()
    }
    bad = {method: statuses for method, statuses in bad.items() if statuses}
    checks = [
        {"name": "every request answered 200", "ok": not bad, "detail": json.dumps(bad) if bad else "all 200"},
        {
            "name": "every method measured",
            "ok": all(figures["requests"] > 0 for figures in results.values()),
            "detail": ", ".join(f"{method}: {figures['requests']}" for method, figures in results.items()),
        },
        {"name": "gunicorn stopped gracefully", "ok": code == 0, "detail": f"exit {code}"},
    ]
    return {
        "config": {
            "seconds": args.seconds,
            "clients": args.clients,
            "gunicorn_workers": args.workers,
            "gunicorn_threads": args.threads,
            "request": f"GET /api/queues/{QUEUE}/",
        },
        "methods": results,
        "grants_rounds": rounds,
        "checks": checks,
        "ok": all(check["ok"] for check in checks),
    }


def alternate(base_url: str, prefix: str, tokens: list[str], granted: list[str], args: argparse.Namespace) -> dict:
    """``args.rounds`` rounds of a token window and a grants window, in alternating order: each
    round's grants rate over its token rate, and their median (see the module docstring)."""
    ratios = []
    for index in range(args.rounds):
        order = ("token", "grants") if index % 2 == 0 else ("grants", "token")
        rates = {}
        for method in order:
            chosen = tokens if method == "token" else granted
            setups = [{"headers": {"Authorization": f"{prefix} {token}"}} for token in chosen]
            rates[method] = measure(base_url, setups, args.seconds)["requests_per_s"]
        ratios.append(round(rates["grants"] / rates["token"], 3) if rates["token"] else None)
        log(f"round {index + 1}: token {rates['token']} req/s, grants {rates['grants']} req/s")
    measured = sorted(ratio for ratio in ratios if ratio is not None)
    median = measured[len(measured) // 2] if measured else None
    return {"rounds": args.rounds, "grants_over_token": ratios, "median": median}


def render(report: dict[str, Any]) -> str:
    config = report["config"]
    lines = [
        f"Authentication cost: {config['clients']} clients, {config['seconds']:g} s per method, "
        f"gunicorn {config['gunicorn_workers']} workers x {config['gunicorn_threads']} threads, "
        f"{config['request']}",
        "",
    ]
    rows = [
        (
            method,
            figures["requests"],
            figures["requests_per_s"],
            figures["p50_ms"],
            figures["p99_ms"],
            figures["token_rate_divided_by_this"],
        )
        for method, figures in report["methods"].items()
    ]
    lines.append(harness.table(rows, ("method", "requests", "req/s", "p50 ms", "p99 ms", "x slower than token")))
    lines.append("")
    rounds = report.get("grants_rounds")
    if rounds:
        lines.append(
            f"Grants check: grants rate / token rate over {rounds['rounds']} alternating rounds: median "
            f"{rounds['median']} (rounds: {', '.join(str(r) for r in rounds['grants_over_token'])})"
        )
        lines.append("")
    lines += [f"{'PASS' if check['ok'] else 'FAIL'}  {check['name']}: {check['detail']}" for check in report["checks"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return harness.main(argv, parse_args, run, render)


if __name__ == "__main__":
    sys.exit(main())
