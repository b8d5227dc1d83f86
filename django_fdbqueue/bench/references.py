"""Starting the references ``--compare`` asks for: a private redis-server, and a raw SQLite file
beside the embedded store; each is stopped or removed when the run's exit stack closes."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator

from .progress import Progress
from .targets import Target


def start_redis(stack: contextlib.ExitStack, progress: Progress) -> Target:
    """A redis-server of our own (no persistence), and the target that measures it."""
    from .redis_ref import RedisServer, RedisTarget, check_available

    server = stack.enter_context(RedisServer(check_available()))
    progress.note(f"Started redis-server {server.version} on 127.0.0.1:{server.port} (no persistence).")
    target = RedisTarget(server.port, server)
    stack.callback(target.close)
    return target


def open_sqlite(stack: contextlib.ExitStack) -> tuple[Target, str]:
    """The SQLite reference's target, and where its file is (for the run's metadata)."""
    from .sqlite_ref import SqliteTarget

    directory, location = stack.enter_context(reference_directory())
    target = SqliteTarget(os.path.join(directory, "reference.sqlite3"))
    stack.callback(target.close)
    return target, location


@contextlib.contextmanager
def reference_directory() -> Iterator[tuple[str, str]]:
    """A directory for the SQLite reference, beside the embedded store (the same disk), and where it is."""
    from django_fdbqueue.conf import get_settings

    settings = get_settings()
    parent = None
    if settings.engine == "embedded":
        parent = os.path.dirname(os.path.abspath(settings.path))
    try:
        directory = tempfile.mkdtemp(prefix="fdbqueue-bench-", dir=parent)
        location = "beside the embedded store (same disk)" if parent else "temporary directory"
    except OSError:
        directory = tempfile.mkdtemp(prefix="fdbqueue-bench-")
        location = "temporary directory (the store's directory is not writable)"
    try:
        yield directory, location
    finally:
        shutil.rmtree(directory, ignore_errors=True)
