"""What the reliability runs share: a run directory, the demo under gunicorn, child processes
that are always stopped, Django set up in the driver, and latency figures.

Every wait here has a deadline and every child is killed if the run fails, so a broken run ends
with an error instead of hanging or leaving servers behind. Children get their own session
(process group), so a forced stop kills a gunicorn master with its workers, by the group's id.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = REPO_ROOT / "demo_project"
SCRIPTS_DIR = Path(__file__).resolve().parent
PYTHON = sys.executable
SETTINGS_MODULE = "demo.settings_load"
LOAD_USER = "load"
# The password of the run's own throw-away user (its database lives in the run's temp dir).
LOAD_PASSWORD = "load-run-password"


class RunFailed(Exception):
    """A run could not do what it set out to (a server that never answered, a child that died)."""


def log(message: str) -> None:
    """Progress on standard error, so standard output stays the report (or its JSON)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A loopback port nobody listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], bool], seconds: float, what: str, interval: float = 0.1) -> None:
    """Poll ``check`` until it is true; RunFailed after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RunFailed(f"timed out after {seconds:g} s waiting for {what}")
        time.sleep(interval)


# -- the run's directory and environment -----------------------------------------------------


@dataclass
class RunEnv:
    """The run's temp directory and the environment every child gets (see settings_load)."""

    directory: Path
    faults: dict[str, float] | None = None
    task_lease: float | None = None
    timeout: float | None = None

    def environ(self, *, faults: bool = True) -> dict[str, str]:
        """The environment of a child; ``faults=False`` for a process that must see no faults."""
        env = dict(os.environ)
        env["DJANGO_SETTINGS_MODULE"] = SETTINGS_MODULE
        env["FDBQUEUE_LOAD_DIR"] = str(self.directory)
        if faults:
            env["FDBQUEUE_LOAD_FAULT_LOG"] = str(self.directory)
        else:
            env.pop("FDBQUEUE_LOAD_FAULT_LOG", None)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(DEMO_DIR), str(REPO_ROOT), str(SCRIPTS_DIR), env.get("PYTHONPATH")])
        )
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("FDBQUEUE_LOAD_FAULTS", None)
        if faults and self.faults:
            env["FDBQUEUE_LOAD_FAULTS"] = json.dumps(self.faults)
        if self.task_lease is not None:
            env["FDBQUEUE_LOAD_TASK_LEASE"] = str(self.task_lease)
        if self.timeout is not None:
            env["FDBQUEUE_LOAD_TIMEOUT"] = str(self.timeout)
        return env

    @property
    def store_path(self) -> Path:
        return self.directory / "fdbqueue.sqlite3"

    def fault_counts(self) -> dict[str, int]:
        """Faults injected by the processes that have exited cleanly so far, summed."""
        total: dict[str, int] = {}
        for path in self.directory.glob("faults-*.json"):
            for kind, count in json.loads(path.read_text(encoding="utf-8")).items():
                total[kind] = total.get(kind, 0) + count
        return total


@contextlib.contextmanager
def run_directory(keep: bool = False) -> Iterator[Path]:
    """A fresh temp directory for the run's store, database, journals and logs."""
    directory = Path(tempfile.mkdtemp(prefix="fdbqueue-reliability-"))
    try:
        yield directory
    finally:
        if keep:
            log(f"run directory kept: {directory}")
        else:
            import shutil

            shutil.rmtree(directory, ignore_errors=True)


def setup_django(run: RunEnv) -> None:
    """Configure Django in this process (the driver) on the run's settings, without faults.

    The driver creates users, tokens and queues, and checks the store at the end: it must see
    the store as it is, so it never injects faults itself.
    """
    os.environ.update(run.environ(faults=False))
    for path in (str(DEMO_DIR), str(REPO_ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def make_user_and_tokens(count: int) -> tuple[str, list[str]]:
    """The run's superuser and ``count`` API tokens for it; returns the header prefix and tokens."""
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken
    from knox.settings import knox_settings

    user_model = get_user_model()
    user = user_model.objects.filter(username=LOAD_USER).first()
    if user is None:
        user = user_model.objects.create_superuser(LOAD_USER, "load@example.com", LOAD_PASSWORD)
    tokens = [AuthToken.objects.create(user)[1] for _ in range(count)]
    return knox_settings.AUTH_HEADER_PREFIX, tokens


# -- child processes ----------------------------------------------------------------------------


@dataclass
class Child:
    """One child process, its log files, and how to stop it."""

    name: str
    process: subprocess.Popen
    stdout: Path
    stderr: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL to its whole group after ``grace`` seconds; its exit code."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                log(f"{self.name} did not stop within {grace:g} s: killing it")
                self.kill()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL to the child's process group (a gunicorn master and its workers together)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)

    def tail(self, lines: int = 20) -> str:
        """The end of its standard error, for a failure's message."""
        try:
            text = self.stderr.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class Children:
    """Every child a run starts; all of them are killed when the run leaves its ``with`` block."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Child] = []

    def __enter__(self) -> "Children":
        return self

    def __exit__(self, *exc: Any) -> None:
        for child in reversed(self.started):
            if child.alive():
                child.kill()

    def start(self, name: str, command: Sequence[str], env: dict[str, str], cwd: Path = DEMO_DIR) -> Child:
        """Start ``command`` in a new session, its output in ``<name>.out`` / ``<name>.err``."""
        index = len(self.started)
        out = self.directory / f"{index:02d}-{name}.out"
        err = self.directory / f"{index:02d}-{name}.err"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=str(cwd),
                start_new_session=True,
            )
        child = Child(name, process, out, err)
        self.started.append(child)
        return child


def manage(*args: str) -> list[str]:
    """The command line of ``manage.py ARGS`` with this interpreter."""
    return [PYTHON, str(DEMO_DIR / "manage.py"), *args]


# -- gunicorn ---------------------------------------------------------------------------------


@dataclass
class Server:
    """The demo served by gunicorn on a loopback port."""

    child: Child
    port: int
    workers: int
    threads: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def worker_pids(self) -> list[int]:
        """The gunicorn workers now running (the master's children)."""
        path = Path(f"/proc/{self.child.pid}/task/{self.child.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []


#: How gunicorn serves the demo: WSGI with gthread workers (``threads`` each), or ASGI with
#: uvicorn's worker, as docs/howto/production.md deploys each.
SERVERS = {
    "gthread": ("demo.wsgi:application", "gthread"),
    "asgi": ("demo.asgi:application", "uvicorn_worker.UvicornWorker"),
}


def start_server(
    children: Children,
    run: RunEnv,
    *,
    workers: int = 4,
    threads: int = 4,
    ready_seconds: float = 60.0,
    kind: str = "gthread",
) -> Server:
    """Start gunicorn with ``workers`` processes of ``threads`` threads; return once it answers.

    gthread workers, so a request that waits (long polling) does not hold a whole process; or,
    ``kind="asgi"``, uvicorn's worker on the demo's ASGI application (``threads`` unused).
    """
    port = free_port()
    app, worker_class = SERVERS[kind]
    command = [
        PYTHON,
        "-m",
        "gunicorn",
        app,
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--worker-class",
        worker_class,
        "--timeout",
        "60",
        "--graceful-timeout",
        "10",
        "--keep-alive",
        "30",
        "--backlog",
        "256",
        "--log-level",
        "warning",
    ]
    child = children.start("gunicorn", command, run.environ(), cwd=DEMO_DIR)
    server = Server(child, port, workers, threads)
    wait_until(lambda: _answers(server), ready_seconds, "gunicorn to answer")
    wait_until(lambda: len(server.worker_pids()) >= workers, ready_seconds, "every gunicorn worker")
    return server


def _answers(server: Server) -> bool:
    """True once the server answers HTTP (any status); RunFailed if gunicorn died."""
    if not server.child.alive():
        raise RunFailed(f"gunicorn exited with {server.child.process.returncode}:\n{server.child.tail()}")
    import httpx

    try:
        httpx.get(server.base_url + "/api/queues/", timeout=2.0)
        return True
    except httpx.HTTPError:
        return False


def warm_up(server: Server, headers: dict[str, str], seconds: float = 30.0) -> None:
    """One authenticated request per worker process, so no client pays a worker's first request."""
    import httpx

    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=server.base_url, headers=headers, timeout=10.0) as client:
        for _ in range(server.workers * server.threads):
            if time.monotonic() > deadline:
                break
            client.get("/api/queues/", headers={"Connection": "close"})


# -- figures ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of ``values`` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


@dataclass
class OpFigures:
    """Requests of one operation: how many, how fast, what they answered."""

    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)

    def add(self, status: Any, ms: float | None) -> None:
        key = str(status)
        self.statuses[key] = self.statuses.get(key, 0) + 1
        if ms is not None:
            self.latencies_ms.append(ms)

    def summary(self, seconds: float) -> dict[str, Any]:
        count = sum(self.statuses.values())
        p50, p99 = percentile(self.latencies_ms, 0.50), percentile(self.latencies_ms, 0.99)
        return {
            "requests": count,
            "requests_per_s": round(count / seconds, 1) if seconds > 0 else None,
            "p50_ms": None if p50 is None else round(p50, 2),
            "p99_ms": None if p99 is None else round(p99, 2),
            "statuses": dict(sorted(self.statuses.items())),
        }


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain text table: left-aligned first column, right-aligned numbers."""
    cells = [[str(cell) for cell in header]] + [["-" if cell is None else str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for index, row in enumerate(cells):
        lines.append(
            "  ".join(
                cell.ljust(widths[i]) if i == 0 or i == len(row) - 1 else cell.rjust(widths[i])
                for i, cell in enumerate(row)
            ).rstrip()
        )
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def verdicts(report: dict[str, Any]) -> list[str]:
    """The report's checks, one PASS or FAIL line each, then the overall verdict."""
    lines = [f"{'PASS' if check['ok'] else 'FAIL'}  {check['name']}: {check['detail']}" for check in report["checks"]]
    return lines + ["", "ALL CHECKS PASSED" if report["ok"] else "SOME CHECKS FAILED"]


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(
    argv: list[str] | None,
    parse_args: Callable[[list[str] | None], Any],
    run: Callable[[Any, Path], dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    *,
    stop_on_term: bool = False,
) -> int:
    """What every proof script's command line does: run in a temp directory, print, exit 0/1/2.

    0 when every check passed, 1 when one failed, 2 when the run itself could not finish.
    ``stop_on_term``: SIGTERM (a ``timeout``, a CI's cancel) unwinds like Ctrl-C, so the servers
    the run started are stopped too.
    """
    if stop_on_term:
        signal.signal(signal.SIGTERM, _interrupted)
    args = parse_args(argv)
    with run_directory(keep=args.keep) as directory:
        try:
            report = run(args, directory)
        except RunFailed as error:
            log(f"run failed: {error}")
            if args.json:
                print(json.dumps({"ok": False, "error": str(error)}))
            return 2
    print(json.dumps(report, indent=1) if args.json else render(report))
    return 0 if report["ok"] else 1
