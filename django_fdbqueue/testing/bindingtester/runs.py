"""One run of the binding tester's driver against one database, in processes of its own.

The driver (``bindingtester.py``) writes a seeded test into the database, starts the Python
tester as ``python .../tester.py PREFIX API_VERSION CLUSTER_FILE``, then checks what it left.
Each run gets a folder with a ``python`` that comes back to ``launch`` with this interpreter,
first on the PATH of the driver (and so of the testers it starts), and the environment that
chooses the engine: the embedded stand-in, or the official binding with the client library.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import EMBEDDED, ENGINE_ENV

#: The engines a run can use: the embedded engine, or a cluster through the official binding.
ENGINES = (EMBEDDED, "foundationdb")
#: The tests of the driver this runner knows how to compare.
TESTS = ("api", "directory", "directory_hca")
TESTER_DIR_ENV = "FDBQUEUE_BINDING_TESTER"
#: Where the binding tester is under FDB_HOME (the layout of FoundationDB's source tree beneath).
UNDER_FDB_HOME = ("bindingtester",)
#: The folder this package is imported from: the driver and testers run in a folder of their own,
#: where a relative PYTHONPATH (``PYTHONPATH=.``) would name another, and another checkout's code.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


class TesterNotFound(RuntimeError):
    """No binding tester where we looked (the message says where)."""


def find_tester(tester_dir: str | None = None) -> Path:
    """The folder holding ``bindings/bindingtester/bindingtester.py`` and ``bindings/python/tests``.

    ``tester_dir`` first, then ``$FDBQUEUE_BINDING_TESTER``, then ``$FDB_HOME/bindingtester``.
    """
    candidates = [tester_dir, os.environ.get(TESTER_DIR_ENV)]
    if os.environ.get("FDB_HOME"):
        candidates.append(os.path.join(os.environ["FDB_HOME"], *UNDER_FDB_HOME))
    tried = []
    for candidate in candidates:
        if not candidate:
            continue
        root = Path(candidate).resolve()
        tried.append(str(root))
        if driver_path(root).is_file() and (root / "bindings" / "python" / "tests" / "tester.py").is_file():
            return root
    raise TesterNotFound(
        "FoundationDB's binding tester was not found"
        + (f" (looked in {', '.join(tried)})" if tried else "")
        + f": give its folder (the one with bindings/bindingtester) with --tester-dir or ${TESTER_DIR_ENV},"
        " or set FDB_HOME to a folder with bindingtester/ in it."
    )


def driver_path(root: Path) -> Path:
    return root / "bindings" / "bindingtester" / "bindingtester.py"


@dataclass(frozen=True)
class Plan:
    """What one run does: the test, its seed and size, and how long it may take."""

    test: str
    seed: int
    num_ops: int = 100
    concurrency: int = 1
    api_version: int = 730
    timeout: float = 300.0


@dataclass
class Target:
    """Where a run goes: an engine and its "cluster file" (the store's path for the embedded engine)."""

    engine: str
    cluster_file: str
    client_library: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)


@dataclass
class DriverRun:
    """How the driver ended, and what it printed."""

    returncode: int
    output: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def write_python_wrapper(folder: Path) -> Path:
    """A ``python`` in ``folder`` that runs scripts through ``launch`` with this interpreter."""
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "python"
    wrapper.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m django_fdbqueue.testing.bindingtester.launch "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return wrapper


def environment(target: Target, wrapper_dir: Path) -> dict[str, str]:
    """The driver's environment: our ``python`` first, this package's code, and the engine chosen."""
    env = dict(os.environ)
    env["PATH"] = f"{wrapper_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    env[ENGINE_ENV] = target.engine
    env.pop("PYTHONSTARTUP", None)
    if target.client_library:
        folder = os.path.dirname(os.path.abspath(target.client_library))
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (folder, env.get("LD_LIBRARY_PATH")) if p)
    env.update(target.extra_env)
    return env


def driver_command(root: Path, plan: Plan, target: Target) -> list[str]:
    """The driver's command line: the Python tester, the seed, the size, no tenants."""
    command = [
        sys.executable,
        "-m",
        "django_fdbqueue.testing.bindingtester.launch",
        str(driver_path(root)),
        "python",
        "--test-name",
        plan.test,
        "--seed",
        str(plan.seed),
        "--num-ops",
        str(plan.num_ops),
        "--concurrency",
        str(plan.concurrency),
        "--api-version",
        str(plan.api_version),
        "--cluster-file",
        target.cluster_file,
        "--timeout",
        str(max(1, int(plan.timeout))),
        "--no-tenants",
    ]
    return command


def run_driver(root: Path, plan: Plan, target: Target, wrapper_dir: Path) -> DriverRun:
    """Run the driver once; its processes (the testers too) are stopped if it overruns."""
    process = subprocess.Popen(
        driver_command(root, plan, target),
        env=environment(target, wrapper_dir),
        cwd=str(wrapper_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group: the testers it starts are in it
    )
    try:
        output, _ = process.communicate(timeout=plan.timeout + 30)
        return DriverRun(process.returncode, output)
    except subprocess.TimeoutExpired:
        stop_group(process)
        output, _ = process.communicate()
        return DriverRun(process.returncode if process.returncode is not None else -9, output or "", timed_out=True)
    finally:
        if process.poll() is None:
            stop_group(process)


def stop_group(process: subprocess.Popen[str]) -> None:
    """Kill the process group this run started (the driver and its testers), by the driver's pid."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def dump_results(root: Path, plan: Plan, target: Target, wrapper_dir: Path, out: Path) -> DriverRun:
    """Read the run's result subspaces into ``out`` (JSON), in a process on the run's engine."""
    command = [
        sys.executable,
        "-m",
        "django_fdbqueue.testing.bindingtester.results",
        str(root),
        plan.test,
        target.cluster_file,
        str(plan.api_version),
        str(out),
    ]
    try:
        done = subprocess.run(
            command,
            env=environment(target, wrapper_dir),
            cwd=str(wrapper_dir),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    except subprocess.TimeoutExpired as error:
        return DriverRun(-9, str(error.output or ""), timed_out=True)
    return DriverRun(done.returncode, done.stdout + done.stderr)
