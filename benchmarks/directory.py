"""A scratch directory for a reference's files, beside the embedded store: the same disk."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator


@contextlib.contextmanager
def reference_directory() -> Iterator[tuple[str, str]]:
    """A directory for a reference beside the embedded store (the same disk), and where it is."""
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
