"""Task functions for the Tasks backend's tests: module-level, as the framework requires."""

from __future__ import annotations

import asyncio
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
def big_result(size: int) -> str:
    """A return value of ``size`` characters (so about ``size`` bytes of JSON)."""
    return "x" * size


@task()
def fail_loudly(size: int) -> None:
    """Raise with a message of about ``size`` characters: a traceback too long for the record."""
    raise ValueError("start " + "x" * size + " end")


@task()
def enqueue_shout(text: str, wait_for: str | None = None) -> str:
    """Enqueue a task on the other queue (``shout`` runs on "emails"); return its result id.

    With ``wait_for``, only once that file exists (bounded), so a test can choose the moment.
    """
    deadline = time.monotonic() + 60
    while wait_for is not None and not Path(wait_for).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{wait_for} never appeared")
        time.sleep(0.02)
    return shout.enqueue(text).id


@task()
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task()
async def async_fail(message: str) -> None:
    await asyncio.sleep(0)
    raise ValueError(message)


@task(takes_context=True)
async def async_attempt_number(context) -> int:
    await asyncio.sleep(0)
    return context.attempt


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
