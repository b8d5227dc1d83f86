"""What a spawned test process needs to use the parent's store: Django set up the same way."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

REPO_ROOT = Path(__file__).resolve().parents[1]


def child_database(fdbqueue_setting: dict) -> Any:
    """Configure Django in a spawned child exactly like the parent's test store, and open it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.test.utils import override_settings

    override_settings(FDBQUEUE=fdbqueue_setting).enable()
    from django_fdbqueue import connection

    return connection.get_database()


def join_all(processes: list, seconds: float) -> None:
    """Join every process within `seconds` each; each must have exited cleanly."""
    for process in processes:
        process.join(seconds)
        assert process.exitcode == 0, f"{process.name} ended with exit code {process.exitcode}"


def kill_leftovers(processes: list) -> None:
    """After a failure, leave no child running (bounded)."""
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join(10)


@contextlib.contextmanager
def command_process(tmp_path: Path, *command: str) -> Iterator[Callable[..., tuple[subprocess.Popen, Path, Path]]]:
    """Start ``python -m django fdbqueue COMMAND... ARGS`` processes on the test's store.

    Yields ``start(*args) -> (process, stdout_path, stderr_path)``. The children get a settings
    module that is the test settings with this test's FDBQUEUE (the store, or the cluster and
    ROOT), so they see what the test sees. Every child still running at the end is killed.
    """
    from django.conf import settings as django_settings

    settings_dir = tmp_path / "child-settings"
    settings_dir.mkdir(exist_ok=True)
    (settings_dir / "child_test_settings.py").write_text(
        f"from tests.settings import *  # noqa: F401,F403\n\nFDBQUEUE = {dict(django_settings.FDBQUEUE)!r}\n",
        encoding="utf-8",
    )
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "child_test_settings"
    env["PYTHONPATH"] = os.pathsep.join([str(settings_dir), str(REPO_ROOT), env.get("PYTHONPATH", "")])
    started: list[subprocess.Popen] = []

    def start(*args: str) -> tuple[subprocess.Popen, Path, Path]:
        index = len(started)
        out, err = tmp_path / f"stdout-{index}.txt", tmp_path / f"stderr-{index}.txt"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "django", "fdbqueue", *command, *args],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=str(tmp_path),
            )
        started.append(process)
        return process, out, err

    try:
        yield start
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(60)
