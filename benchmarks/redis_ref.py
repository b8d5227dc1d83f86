"""The Redis reference: a private redis-server, and the bench's queue operations on sorted sets.

The server is Debian's ``redis-server``, started for the run on a free loopback port, without
persistence (``--save '' --appendonly no``), in a temporary directory; :class:`RedisServer`
stops it and removes the directory when the run ends, however it ends. It runs in its own
session, so a Ctrl-C at the terminal reaches the bench (which then stops it) and not the server
in the middle of a row.

A queue is one sorted set: ZADD with the priority as the score; ZPOPMIN takes the lowest
priority. Redis orders equal scores by member bytes, so for first-in-first-out within a priority
a member *starts* with a zero-padded, always increasing number (wall-clock nanoseconds, bumped
when two pushes of a process read the same clock) and carries the JSON value after it. ZPOPMAX
takes the highest priority, but within it the newest member: the max end is not FIFO as the
app's is (the bench pops from the min end only). Every client has its own connection.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Any, Hashable, Sequence

from django_fdbqueue.bench.references import ReferenceUnavailable
from django_fdbqueue.bench.targets import TargetSpec

__all__ = [
    "RedisUnavailable",
    "RedisServer",
    "RedisTarget",
    "RedisClient",
    "find_server",
    "check_available",
    "open_target",
]

_SERVER_CANDIDATES = ("/usr/bin/redis-server", "/usr/local/bin/redis-server", "/usr/sbin/redis-server")
_KEY_PREFIX = "fdbqueue-bench:"
_START_SECONDS = 15.0
_STOP_SECONDS = 10.0
_SOCKET_SECONDS = 60.0


class RedisUnavailable(ReferenceUnavailable):
    """The Redis reference cannot run here; the message says what to install."""


def find_server() -> str | None:
    """The redis-server binary: on PATH, or where Debian and the usual installs put it."""
    found = shutil.which("redis-server")
    if found:
        return found
    return next((path for path in _SERVER_CANDIDATES if os.access(path, os.X_OK)), None)


def check_available() -> str:
    """The server binary's path, after checking that it and the redis client package exist."""
    binary = find_server()
    if binary is None:
        raise RedisUnavailable(
            "--compare redis needs redis-server, which is not installed: on Debian or Ubuntu run "
            "`sudo apt-get install redis-server` (./scripts/test installs it when run as root)."
        )
    try:
        import redis  # noqa: F401
    except ImportError:
        raise RedisUnavailable(
            "--compare redis needs the redis client package: the app's 'bench' extra (or pip install 'redis>=5')."
        ) from None
    return binary


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """A throw-away redis-server: ``with RedisServer(binary) as server: server.port``."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port: int | None = None
        self.version: str | None = None
        self._process: subprocess.Popen | None = None
        self._directory: str | None = None

    def __enter__(self) -> "RedisServer":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def start(self) -> None:
        import redis

        self._directory = tempfile.mkdtemp(prefix="fdbqueue-bench-redis-")
        log_path = os.path.join(self._directory, "redis.log")
        problem = "it did not answer"
        # Another program may take the free port between our probe and the server's bind: retry.
        for _attempt in range(3):
            port = _free_port()
            command = [
                self.binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self._directory,
                "--logfile",
                log_path,
                "--daemonize",
                "no",
            ]
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0, socket_connect_timeout=1.0)
            deadline = time.monotonic() + _START_SECONDS
            try:
                while time.monotonic() < deadline and self._process.poll() is None:
                    try:
                        info = client.info("server")
                    except redis.exceptions.RedisError:
                        self._wait_for_exit(0.05)  # not listening yet; return early if it died
                        continue
                    self.port = port
                    self.version = str(info.get("redis_version", "unknown"))
                    return
            finally:
                client.close()
            problem = self._log_tail(log_path) or f"exit status {self._process.poll()}"
            self._terminate()
        raise RedisUnavailable(f"redis-server did not start: {problem}")

    def _wait_for_exit(self, seconds: float) -> None:
        try:
            self._process.wait(seconds)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            pass

    @staticmethod
    def _log_tail(path: str) -> str:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = [line.strip() for line in handle if line.strip()]
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(_STOP_SECONDS)

    def stop(self) -> None:
        """Stop the server and remove its directory; safe to call twice, or after a failed start."""
        try:
            self._terminate()
        finally:
            if self._directory is not None:
                shutil.rmtree(self._directory, ignore_errors=True)
                self._directory = None

    def peak_memory_mib(self) -> float | None:
        """The server's peak resident memory, from /proc (None where there is no /proc)."""
        process = self._process
        if process is None:
            return None
        try:
            with open(f"/proc/{process.pid}/status", encoding="ascii", errors="replace") as handle:
                for line in handle:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024.0
        except (OSError, ValueError, IndexError):
            return None
        return None


class _Sequence:
    """Increasing numbers in roughly wall-clock order across processes: members sort in push order."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return self._last


_sequence = _Sequence()


def _member(value: Any) -> bytes:
    return b"%020d:" % _sequence.next() + json.dumps(value, separators=(",", ":")).encode()


def _decode(member: bytes) -> Any:
    return json.loads(member[21:])


def _connect(port: int) -> Any:
    import redis

    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=_SOCKET_SECONDS, single_connection_client=True)


class RedisClient:
    """One connection working on one sorted set."""

    def __init__(self, port: int, key: str) -> None:
        self._redis = _connect(port)
        self._key = key

    def push(self, value: Any, priority: int) -> None:
        self._redis.zadd(self._key, {_member(value): priority})

    def pop(self, end: str) -> Hashable | None:
        popped = self._redis.zpopmin(self._key) if end == "min" else self._redis.zpopmax(self._key)
        if not popped:
            return None
        member, _score = popped[0]
        _decode(member)  # the app's pop decodes the value too
        return member

    def peek(self, end: str) -> Hashable | None:
        position = 0 if end == "min" else -1
        members = self._redis.zrange(self._key, position, position)
        if not members:
            return None
        _decode(members[0])
        return members[0]

    def close(self) -> None:
        self._redis.close()


class RedisTarget:
    """A redis-server seen as a bench target; the strategy is ignored (Redis has one way to pop)."""

    name = "redis"

    def __init__(self, port: int, server: RedisServer | None = None) -> None:
        self._port = port
        self._server = server
        self._admin = _connect(port)

    @staticmethod
    def key(queue: str) -> str:
        return _KEY_PREFIX + queue

    def spec(self) -> TargetSpec:
        return TargetSpec("redis", {"port": self._port}, opener=f"{__name__}:open_target")

    def prepare(self, queue: str, strategy: str | None) -> None:
        self._admin.delete(self.key(queue))

    def fill(self, queue: str, strategy: str | None, batch: Sequence[tuple[Any, int]]) -> None:
        self._admin.zadd(self.key(queue), {_member(value): priority for value, priority in batch})

    def remaining(self, queue: str, strategy: str | None) -> int:
        return int(self._admin.zcard(self.key(queue)))

    def drop(self, queue: str, strategy: str | None) -> None:
        self._admin.unlink(self.key(queue))

    def client(self, queue: str, strategy: str | None) -> RedisClient:
        return RedisClient(self._port, self.key(queue))

    def retry_counts(self) -> dict[int, int] | None:
        return None

    def server_memory_mib(self) -> float | None:
        return self._server.peak_memory_mib() if self._server is not None else None

    def metadata(self) -> dict[str, Any]:
        import redis

        return {
            "server_version": self._server.version if self._server is not None else None,
            "client_version": getattr(redis, "__version__", None),
            "persistence": "none (--save '' --appendonly no)",
            "transport": "TCP on 127.0.0.1",
        }

    def close(self) -> None:
        self._admin.close()


def open_target(port: int) -> RedisTarget:
    """A client process's view of the parent's server."""
    return RedisTarget(port)
