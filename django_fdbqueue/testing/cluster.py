"""A throwaway FoundationDB cluster on loopback, for tests and benchmarks.

``LocalCluster(processes=1)`` starts one ``fdbserver`` (``single`` redundancy);
``processes=3`` starts three in three zones (``double`` redundancy), which is what fault tests
need: one process can be killed and the database recovers. Everything lives in one temporary
folder (cluster file, data, logs, and ``cluster.json`` with the pids), so another process (the
``scripts/fdb-cluster`` command) can stop exactly what was started, and nothing else, by its pids.

On loopback a commit takes about a millisecond, where a real cluster's take 2-10 ms (the
log servers' disks, the network between machines): figures measured there flatter every extra
round trip. ``commit_latency`` (``--commit-latency 5ms``) gives every commit a real cluster's
latency through fdbserver's commit batching knobs (see :func:`commit_latency_knobs`), and
``knobs`` passes any other server knob as it is.

Only the standard library is used: the command runs before the project is installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .binaries import Binaries, BinariesNotFound, find

STATE_FILE = "cluster.json"
CLUSTER_FILE = "fdb.cluster"
#: How long starting may take before it gives up (configuring a new database takes seconds).
START_TIMEOUT = 90.0
STOP_TIMEOUT = 15.0
AVAILABLE = "The database is available"
#: fdbserver's default ceiling on the commit batch interval (COMMIT_TRANSACTION_BATCH_INTERVAL_MAX).
BATCH_INTERVAL_MAX = 0.020
#: The longest commit latency a local cluster is given: far more than any real cluster's.
MAX_COMMIT_LATENCY = 1.0
#: What fdbserver prints, and then ignores the knob, for a knob name or value it does not know.
KNOB_WARNINGS = ("Invalid knob option", "for knob option")
_KNOB_NAME = re.compile(r"[a-z][a-z0-9_]*")


class ClusterError(RuntimeError):
    """The cluster did not start, or did not become available in time (the message says which)."""


def commit_latency_knobs(seconds: float) -> dict[str, str]:
    """fdbserver knobs that make every commit wait about ``seconds`` (checked with FoundationDB 7.3).

    A commit proxy gathers commits into batches, waiting between ``_min`` and ``_max`` before it
    sends one on, and ``_from_idle`` when it was idle; raising the floor and the idle wait makes
    every commit, a lone one included, take that long, as on a cluster whose logs are on other
    machines. Reads and read versions are left as they are.
    """
    if not 0 < seconds <= MAX_COMMIT_LATENCY:
        raise ValueError(f"A commit latency is more than 0 and at most {MAX_COMMIT_LATENCY:g} s, not {seconds:g} s.")
    value = f"{seconds:g}"
    knobs = {"commit_transaction_batch_interval_min": value, "commit_transaction_batch_interval_from_idle": value}
    if seconds > BATCH_INTERVAL_MAX:
        knobs["commit_transaction_batch_interval_max"] = value
    return knobs


def parse_latency(text: str) -> float:
    """Seconds from "5ms", "2.5 ms" or "0.005s": the unit is required, so 5 cannot mean 5 s."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)\s*", text)
    if not match:
        raise ValueError(f"Give a commit latency with its unit, such as 5ms or 0.005s, not {text!r}.")
    return float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)


def parse_knob(text: str) -> tuple[str, str]:
    """("name", "value") from "NAME=VALUE" (a "knob_" prefix is dropped): one ``--knob`` option."""
    name, sep, value = text.partition("=")
    name = name.strip().lower().removeprefix("--").removeprefix("knob_")
    if not sep or not _KNOB_NAME.fullmatch(name) or not value.strip() or any(c.isspace() for c in value.strip()):
        raise ValueError(f"A knob is NAME=VALUE, such as commit_transaction_batch_interval_min=0.005, not {text!r}.")
    return name, value.strip()


def free_ports(count: int) -> list[int]:
    """Ports the kernel says are free on 127.0.0.1 now (held open together, so all distinct)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@dataclass
class LocalCluster:
    """One cluster's folder, processes and cluster file; ``start()`` / ``stop()`` or ``with``."""

    processes: int = 1
    storage: str = "memory"
    binaries: Binaries | None = None
    directory: Path | None = None
    ports: list[int] = field(default_factory=list)
    pids: list[int | None] = field(default_factory=list)
    #: Seconds every commit takes (through the commit batching knobs); None: fdbserver's own.
    commit_latency: float | None = None
    #: Other fdbserver knobs, name (without "knob_") to value; they win over the latency's.
    knobs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.processes not in (1, 3):
            raise ValueError("A local cluster has 1 process (single) or 3 (double redundancy).")
        if self.storage not in ("memory", "ssd-2", "ssd"):
            raise ValueError("storage must be 'memory', 'ssd-2' or 'ssd'.")
        self.knobs = dict(parse_knob(f"{name}={value}") for name, value in self.knobs.items())
        if self.commit_latency is not None:
            commit_latency_knobs(self.commit_latency)  # refuses a latency out of range now

    @property
    def server_knobs(self) -> dict[str, str]:
        """Every knob each fdbserver starts with: the commit latency's, then ``knobs``."""
        chosen = commit_latency_knobs(self.commit_latency) if self.commit_latency is not None else {}
        return {**chosen, **self.knobs}

    # -- paths --------------------------------------------------------------------------------
    @property
    def cluster_file(self) -> str:
        assert self.directory is not None, "the cluster is not started"
        return str(self.directory / CLUSTER_FILE)

    @property
    def redundancy(self) -> str:
        return "single" if self.processes == 1 else "double"

    # -- starting ----------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> "LocalCluster":
        """Start the processes, create the database and wait until it is available."""
        self.binaries = self.binaries or find()
        self.directory = Path(tempfile.mkdtemp(prefix="fdbqueue-cluster-"))
        try:
            self.ports = free_ports(self.processes)
            coordinators = ",".join(f"127.0.0.1:{port}" for port in self.ports)
            Path(self.cluster_file).write_text(f"fdbqueue:{secrets.token_hex(8)}@{coordinators}\n")
            self.pids = [None] * self.processes
            for index in range(self.processes):
                self.start_process(index)
            self._save()
            deadline = time.monotonic() + timeout
            self._configure(deadline)
            self.wait_available(deadline - time.monotonic())
            self._check_knobs()
        except BaseException:
            self.stop()
            raise
        return self

    def _command(self, index: int) -> list[str]:
        assert self.binaries is not None and self.directory is not None
        here = self.directory / f"p{index}"
        (here / "data").mkdir(parents=True, exist_ok=True)
        (here / "logs").mkdir(exist_ok=True)
        return [
            self.binaries.fdbserver,
            "-p",
            f"127.0.0.1:{self.ports[index]}",
            "-C",
            self.cluster_file,
            "-d",
            str(here / "data"),
            "-L",
            str(here / "logs"),
            "--locality-zoneid",
            f"z{index}",
            "--locality-machineid",
            f"m{index}",
            *(f"--knob_{name}={value}" for name, value in self.server_knobs.items()),
        ]

    def _check_knobs(self) -> None:
        """Refuse a knob fdbserver ignored: it warns at start-up and runs without it."""
        assert self.directory is not None
        if not self.server_knobs:
            return
        for output in sorted(self.directory.glob("p*.out")):
            for line in output.read_text(errors="replace").splitlines():
                if any(warning in line for warning in KNOB_WARNINGS):
                    raise ClusterError(f"fdbserver refused a knob: {line.strip()}")

    def start_process(self, index: int) -> int:
        """(Re)start process ``index`` with its own data: how a fault test brings one back."""
        assert self.directory is not None
        out = open(self.directory / f"p{index}.out", "ab")
        try:
            process = subprocess.Popen(
                self._command(index),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            out.close()
        self.pids[index] = process.pid
        self._save()
        return process.pid

    def _configure(self, deadline: float) -> None:
        command = f"configure new {self.redundancy} {self.storage}"
        last = ""
        while time.monotonic() < deadline:
            result = self.cli(command, timeout=max(1.0, min(30.0, deadline - time.monotonic())))
            last = (result.stdout + result.stderr).strip()
            if result.returncode == 0 and ("Database created" in last or "already exists" in last):
                return
            if "already exists" in last:
                return
            time.sleep(0.5)
        raise ClusterError(f"'{command}' did not succeed in time; fdbcli said: {last or 'nothing'}")

    def wait_available(self, timeout: float = START_TIMEOUT) -> None:
        """Poll ``status minimal`` until the database is available, or raise ClusterError."""
        deadline = time.monotonic() + max(timeout, 1.0)
        last = ""
        while True:
            result = self.cli("status minimal", timeout=max(1.0, min(10.0, deadline - time.monotonic())))
            last = (result.stdout + result.stderr).strip()
            if AVAILABLE in last:
                return
            if time.monotonic() >= deadline:
                raise ClusterError(f"The database did not become available in time; fdbcli said: {last}")
            time.sleep(0.3)

    def cli(self, command: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
        """Run one fdbcli command against this cluster (never raises for fdbcli's own failures)."""
        assert self.binaries is not None
        seconds = max(1, int(timeout))
        try:
            return subprocess.run(
                [self.binaries.fdbcli, "-C", self.cluster_file, "--exec", command, "--timeout", str(seconds)],
                capture_output=True,
                text=True,
                timeout=seconds + 10,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as error:
            return subprocess.CompletedProcess(error.cmd, 124, "", f"fdbcli did not answer in {seconds} s")

    # -- faults and stopping -------------------------------------------------------------------
    def kill(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to process ``index`` and reap it (SIGKILL: a crash, nothing flushed)."""
        pid = self.pids[index]
        if pid is not None and _ours(pid, self.directory):
            _signal_and_reap(pid, sig, STOP_TIMEOUT)
        self.pids[index] = None
        self._save()

    def running(self) -> list[int]:
        """The indexes of the processes that are up now (a crashed one counts as down)."""
        return [index for index, pid in enumerate(self.pids) if pid is not None and _ours(pid, self.directory)]

    def stop_processes(self, sig: int = signal.SIGTERM) -> None:
        """Stop every process but keep the folder: a whole-cluster outage that
        ``start_processes()`` ends, with the data each process had (the memory engine logs to disk).
        """
        for index in range(self.processes):
            self.kill(index, sig)

    def start_processes(self) -> list[int]:
        """Start every process that is down, each with its own data; the indexes started."""
        down = [index for index in range(self.processes) if index not in self.running()]
        for index in down:
            self.start_process(index)
        return down

    def stop(self) -> None:
        """Stop every process this cluster started (by pid) and remove its folder."""
        for index, pid in enumerate(self.pids):
            if pid is not None and _ours(pid, self.directory):
                _signal_and_reap(pid, signal.SIGTERM, STOP_TIMEOUT)
            self.pids[index] = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> "LocalCluster":
        return self.start() if self.directory is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state shared with the command-line interface ---------------------------------------------
    def _save(self) -> None:
        assert self.directory is not None and self.binaries is not None
        state = {
            "processes": self.processes,
            "storage": self.storage,
            "ports": self.ports,
            "pids": self.pids,
            "binaries": [self.binaries.fdbserver, self.binaries.fdbcli, self.binaries.library],
            "commit_latency": self.commit_latency,
            "knobs": self.knobs,
        }
        (self.directory / STATE_FILE).write_text(json.dumps(state))

    @classmethod
    def load(cls, cluster_file: str | os.PathLike[str]) -> "LocalCluster":
        """The cluster whose cluster file this is, as ``start()`` recorded it."""
        directory = Path(cluster_file).resolve().parent
        try:
            state = json.loads((directory / STATE_FILE).read_text())
        except (OSError, ValueError) as error:
            raise ClusterError(f"{directory} is not a folder made by this script ({error}).") from None
        return cls(
            processes=state["processes"],
            storage=state["storage"],
            binaries=Binaries(*state["binaries"]),
            directory=directory,
            ports=state["ports"],
            pids=state["pids"],
            commit_latency=state.get("commit_latency"),
            knobs=state.get("knobs") or {},
        )


def _ours(pid: int, directory: Path | None) -> bool:
    """Is ``pid`` still an fdbserver of this cluster (not a process that reused the pid)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return _alive(pid) and directory is None
    return b"fdbserver" in cmdline and (directory is None or os.fsencode(str(directory)) in cmdline)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_and_reap(pid: int, sig: int, timeout: float) -> None:
    """Signal, wait up to ``timeout`` for the exit (reaping a child of ours), then SIGKILL."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
            if done:
                return
        except ChildProcessError:  # not our child: another process started it
            if not _alive(pid):
                return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


# -- command line: scripts/fdb-cluster ------------------------------------------------------------


def _argument(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a parser that raises ValueError with the message to show."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="fdb-cluster", description="Start, inspect or stop a throwaway local FoundationDB cluster."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a cluster; prints its cluster file's path")
    start.add_argument(
        "--processes",
        type=int,
        choices=(1, 3),
        default=1,
        help="1 (single redundancy) or 3 (double redundancy, for fault tests)",
    )
    start.add_argument("--storage", choices=("memory", "ssd-2", "ssd"), default="memory")
    start.add_argument("--timeout", type=float, default=START_TIMEOUT, help="seconds to become available")
    start.add_argument(
        "--commit-latency",
        type=_argument(parse_latency),
        metavar="TIME",
        help="make every commit take about TIME (5ms, 0.005s), as on a real cluster",
    )
    start.add_argument(
        "--knob",
        type=_argument(parse_knob),
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="pass an fdbserver knob (--knob_NAME=VALUE) to every process; repeatable",
    )
    for name, text in (
        ("stop", "stop the cluster's processes and remove its folder"),
        ("status", "print fdbcli's 'status minimal' for the cluster"),
    ):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("cluster_file", help="the path 'start' printed")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            cluster = LocalCluster(
                processes=args.processes,
                storage=args.storage,
                commit_latency=args.commit_latency,
                knobs=dict(args.knob),
            ).start(args.timeout)
            print(cluster.cluster_file)
        elif args.command == "stop":
            LocalCluster.load(args.cluster_file).stop()
        else:
            cluster = LocalCluster.load(args.cluster_file)
            result = cluster.cli("status minimal")
            print((result.stdout + result.stderr).strip())
            if cluster.server_knobs:
                print("Server knobs: " + ", ".join(f"{name}={value}" for name, value in cluster.server_knobs.items()))
            return 0 if AVAILABLE in result.stdout else 1
    except (BinariesNotFound, ClusterError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
