"""Handlers for the worker tests that run ``manage.py fdbqueue worker`` in a child process.

They talk to the test through files in the directory named by FDBQUEUE_WORKER_TEST_DIR: a
handler announces that it started, then waits (bounded) for the test's go-ahead.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

#: Longest a handler waits for the test: far beyond any test's own deadline.
GIVE_UP_SECONDS = 60
NOT_CALLABLE = "a string, not a function"


def _directory() -> Path:
    return Path(os.environ["FDBQUEUE_WORKER_TEST_DIR"])


def wait_for_go(item) -> None:
    """Write started-<id>, then return once the file ``go`` exists (raise after a minute)."""
    directory = _directory()
    (directory / f"started-{item.value['n']}").write_text(json.dumps({"attempts": item.attempts}))
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not (directory / "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never said go")
        time.sleep(0.02)
    (directory / f"done-{item.value['n']}").write_text("")


def record(item) -> None:
    """Write handled-<n> (with the attempt number): which items a worker process handled."""
    (_directory() / f"handled-{item.value['n']}").write_text(json.dumps({"attempts": item.attempts}))
