"""Opening the parent's store in a client process, in the one order that works on a cluster.

A client process is spawned: it inherits nothing, and it must end up on the very store the parent
measures. FoundationDB's client library has to be in the process before the binding is first
imported (see :mod:`django_fdbqueue.clientlib`), and the binding is imported with the service. So
this module imports neither: it loads the library the parent's FDBQUEUE names, then sets Django up
with the parent's settings module and FDBQUEUE, and only then imports the targets.

Every target of a child that measures the app's store (ours, and the project's FoundationDB
recipe beside it, which opens its own through :func:`database`) shares the one handle opened here: a second call with the same settings neither sets Django up
again nor reopens (and so closes) the handle the first target holds.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["database", "open_service"]


def database(settings_module: str, fdbqueue: dict[str, Any]) -> Any:
    """The parent's store in this process: the client library first, then Django, then the handle."""
    from django_fdbqueue import clientlib

    library = fdbqueue.get(clientlib.SETTING_KEY)
    if library and clientlib.loaded_path is None:
        clientlib.load(os.fspath(library))  # a failure is reported by the engine, with the reason
    from django.apps import apps

    if not apps.ready:
        os.environ["DJANGO_SETTINGS_MODULE"] = settings_module
        import django

        django.setup()
    from django.conf import settings as django_settings

    from django_fdbqueue import connection
    from django_fdbqueue.conf import get_settings

    if getattr(django_settings, "FDBQUEUE", None) != fdbqueue:
        django_settings.FDBQUEUE = fdbqueue
        get_settings.cache_clear()
        connection.reset_database()
    return connection.get_database()


def open_service(settings_module: str, fdbqueue: dict[str, Any]) -> Any:
    """The app's queues on the parent's store, as a client process's target."""
    handle = database(settings_module, fdbqueue)
    from .service_target import ChildServiceTarget

    return ChildServiceTarget(handle, settings_module, fdbqueue)
