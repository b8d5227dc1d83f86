"""Load FoundationDB's client library from the path ``FDBQUEUE['CLIENT_LIBRARY']`` names.

The binding loads ``libfdb_c.so`` by name through the dynamic loader, so a library outside the
loader's search path (an unpacked release, a build) would need ``LD_LIBRARY_PATH`` exported
before Python starts. Loading the file first, with ``RTLD_GLOBAL``, makes the binding's own load
by name find it already in the process (the loader matches the library's ``SONAME``).

This must happen before the binding's C layer is imported, which ``fdbapi`` does on import, so
``fdbapi`` calls :func:`preload` first. Where the settings are not configured yet at that moment,
the ``FDBQUEUE_CLIENT_LIBRARY`` environment variable names the library instead. The system checks
report what happened (``E012``).
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

SETTING_KEY = "CLIENT_LIBRARY"
ENV_VARIABLE = "FDBQUEUE_CLIENT_LIBRARY"

_lock = threading.Lock()
_done = False
#: The path loaded from the setting, and why loading it failed (both None when not set).
loaded_path: str | None = None
load_error: str | None = None


def configured_path() -> str | None:
    """The setting's value, else ``$FDBQUEUE_CLIENT_LIBRARY``, else None.

    The variable serves processes that import the app before Django's settings are configured
    (a ``multiprocessing`` child unpickling its target, a script), and test runners.
    """
    from django.conf import settings

    options: Any = getattr(settings, "FDBQUEUE", None) if settings.configured else None
    path = options.get(SETTING_KEY) if isinstance(options, dict) else None
    if isinstance(path, (str, os.PathLike)) and os.fspath(path):
        return os.fspath(path)
    return os.environ.get(ENV_VARIABLE) or None


def library_problem(path: str) -> str | None:
    """Why ``path`` cannot be the client library (before trying to load it), or None."""
    if not os.path.exists(path):
        return f"{path} does not exist"
    if not os.path.isfile(path):
        return f"{path} is not a file"
    if not os.access(path, os.R_OK):
        return f"{path} is not readable by this process"
    return None


def preload() -> None:
    """Load the configured library once per process (a no-op when the setting is absent)."""
    global _done
    with _lock:
        if _done:
            return
        _done = True
    path = configured_path()
    if path is not None:
        load(path)


def load(path: str) -> bool:
    """Load ``path`` into the process for the binding to find; False (and ``load_error``) if not."""
    global loaded_path, load_error
    with _lock:
        problem = library_problem(path)
        if problem is None:
            try:
                ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
            except OSError as error:
                problem = str(error)
        if problem is not None:
            load_error = problem
            return False
        loaded_path, load_error = os.path.abspath(path), None
        return True
