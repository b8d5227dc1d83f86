"""Task functions for the Tasks backend's tests: module-level, as the framework requires."""

from __future__ import annotations

import os
import time
from pathlib import Path

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name="emails", priority=5)
def shout(text: str) -> str:
    return text.upper()


@task()
def fail(message: str) -> None:
    raise ValueError(message)


@task(takes_context=True)
def attempt_number(context) -> int:
    return context.attempt


@task()
def returns_a_set() -> object:
    return {1, 2}


@task()
def record(path: str, label: str) -> str:
    """Append ``label`` to a file: the order tasks ran in, seen from another process."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(label + "\n")
    return label


@task()
def block_until_released(started: str, release: str) -> str:
    """Say it started (a file), then wait for the test to create ``release`` (bounded)."""
    Path(started).write_text(str(os.getpid()), encoding="utf-8")
    deadline = time.monotonic() + 60
    while not Path(release).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never released this task")
        time.sleep(0.05)
    return "released"
