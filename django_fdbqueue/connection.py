"""The process-wide database handle, and the subspace under which the app keeps its keys.

A FoundationDB handle is meant to be shared by every thread of a process (the binding runs one
network thread per process), and the embedded engine's handle likewise: so there is exactly one,
opened on first use rather than at import time, so that importing the app never needs a cluster.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

from django.core.signals import setting_changed

from django_fdbqueue.conf import SETTING_NAME, get_settings
from django_fdbqueue.engines import open_database

if TYPE_CHECKING:  # fdbapi loads the client library: imported when first needed, as below
    from django_fdbqueue.fdbapi import Database, Subspace

_lock = threading.Lock()
_database: Database | None = None


def get_database() -> Database:
    """The process-wide handle of the configured engine, opened lazily and at most once."""
    global _database
    database = _database
    if database is not None:  # the fast path takes no lock
        return database
    with _lock:
        if _database is None:
            _database = open_database(get_settings())
        return _database


def reset_database() -> None:
    """Forget the handle (closing it when the engine can), so the next use opens a new one.

    For tests and settings changes; never call it while other threads are using the handle.
    """
    global _database
    with _lock:
        database, _database = _database, None
    close = getattr(database, "close", None)
    if callable(close):
        close()


def root_subspace() -> Subspace:
    """The ``fdb.Subspace`` of FDBQUEUE['ROOT']: every key the app writes starts with it."""
    return _subspace(get_settings().root)


@functools.lru_cache(maxsize=8)
def _subspace(root: tuple[Any, ...]) -> Subspace:
    """One Subspace per ROOT value: every operation asks for it, and packing it is not free."""
    from django_fdbqueue.fdbapi import fdb

    return fdb.Subspace(root)


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in (SETTING_NAME, "BASE_DIR"):
        reset_database()


setting_changed.connect(_on_setting_changed, dispatch_uid="django_fdbqueue.connection.setting_changed")
