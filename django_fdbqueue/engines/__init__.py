"""Storage engines, chosen by FDBQUEUE['ENGINE'] the way Django chooses cache backends.

Each engine is a module with ``open_database(settings) -> database``; the database offers the
FoundationDB Python API subset the app uses, so the layers above never ask which engine runs.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from django_fdbqueue.conf import QueueSettings

ENGINES: dict[str, str] = {
    "embedded": "django_fdbqueue.engines.embedded",
    "foundationdb": "django_fdbqueue.engines.foundationdb",
}


def engine_module(name: str) -> ModuleType:
    """The module implementing engine ``name`` (ImproperlyConfigured for an unknown name)."""
    try:
        dotted = ENGINES[name]
    except (KeyError, TypeError):
        raise ImproperlyConfigured(
            f"Unknown FDBQUEUE['ENGINE'] {name!r}; choose one of: {', '.join(ENGINES)}."
        ) from None
    return import_module(dotted)


def open_database(settings: QueueSettings) -> Any:
    """Open a new database handle for ``settings`` with the engine they name.

    The handle carries its ROOT (``fdbapi.attach_root``): the service reads it from the handle,
    or from a transaction of it, and never from the settings of the moment.
    """
    from django_fdbqueue.fdbapi import attach_root

    database = engine_module(settings.engine).open_database(settings)
    attach_root(database, settings.root)
    return database
