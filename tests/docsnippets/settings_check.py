"""A settings snippet's app settings, checked the way the app checks them at start-up.

``FDBQUEUE`` goes through the app's own parsing (``conf.validate_options``, ``get_settings``) and
system checks (``checks.check_settings``) under ``override_settings``; a ``TASKS`` backend of the
app is built and asked for its checks; ``INSTALLED_APPS`` and ``REST_FRAMEWORK``'s classes must
import. Findings that depend on this machine rather than on the snippet (a cluster file or a
client library that exists on the reader's servers only) are left out.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from django.test.utils import override_settings
from django.utils.module_loading import import_string

#: Check ids about files on the reader's machines (the cluster file, the client library).
MACHINE_DEPENDENT = {"fdbqueue.E004", "fdbqueue.E010", "fdbqueue.E012", "fdbqueue.W004"}
#: Settings of a page's snippets that its later blocks run with (the store's location stays the test's).
APPLIED = ("TASKS", "REST_FRAMEWORK", "REST_KNOX")
APPLIED_FDBQUEUE_KEYS = ("PERMISSION_CLASSES", "TIMEOUT", "RETRY_LIMIT")


def problems(namespace: Mapping[str, Any]) -> list[str]:
    """What is wrong with the app settings in a settings module's namespace, as check messages."""
    found: list[str] = []
    if "FDBQUEUE" in namespace:
        found += fdbqueue_problems(namespace["FDBQUEUE"], namespace.get("BASE_DIR"))
    found += installed_apps_problems(namespace.get("INSTALLED_APPS", []))
    found += tasks_problems(namespace.get("TASKS"), namespace)
    found += rest_framework_problems(namespace.get("REST_FRAMEWORK"))
    return found


def fdbqueue_problems(options: Any, base_dir: Any) -> list[str]:
    from django.core.exceptions import ImproperlyConfigured

    from django_fdbqueue import conf
    from django_fdbqueue.checks import check_settings

    shape = conf.validate_options(options)
    found = [f"{p.id}: {p.msg} HINT: {p.hint}" for p in shape]
    shape_ids = {p.id for p in shape}
    with override_settings(FDBQUEUE=options, BASE_DIR=base_dir):
        for message in check_settings():
            if message.id in shape_ids or message.id in MACHINE_DEPENDENT:
                continue
            found.append(f"{message.id}: {message.msg} HINT: {message.hint}")
        if not any(p.is_error for p in shape):
            try:
                conf.get_settings()
            except ImproperlyConfigured as error:
                found.append(f"get_settings(): {error}")
    return found


def installed_apps_problems(apps: Any) -> list[str]:
    found = []
    for entry in apps:
        if list(apps).count(entry) > 1:
            found.append(f"INSTALLED_APPS lists {entry!r} more than once")
            continue
        try:
            importlib.import_module(entry)
        except ImportError:
            try:
                import_string(entry)  # an AppConfig's dotted path
            except ImportError as error:
                found.append(f"INSTALLED_APPS entry {entry!r} cannot be imported: {error}")
    return list(dict.fromkeys(found))


def tasks_problems(tasks: Any, namespace: Mapping[str, Any]) -> list[str]:
    """The app's Tasks backends, built from the snippet's TASKS and asked for their checks."""
    if not isinstance(tasks, Mapping):
        return []
    found = []
    for alias, params in tasks.items():
        backend_path = params.get("BACKEND", "") if isinstance(params, Mapping) else ""
        if not backend_path.startswith("django_fdbqueue"):
            continue
        try:
            backend = import_string(backend_path)(alias, dict(params))
            messages = list(backend.check())
        except Exception as error:
            found.append(f"TASKS[{alias!r}]: {type(error).__name__}: {error}")
            continue
        found += [f"{m.id}: {m.msg}" for m in messages if m.is_serious()]
    return found


def rest_framework_problems(options: Any) -> list[str]:
    """Every class REST_FRAMEWORK names (``..._CLASS`` and ``..._CLASSES``) must import."""
    if not isinstance(options, Mapping):
        return []
    found = []
    for key, value in options.items():
        if key.endswith("_CLASSES") and isinstance(value, (list, tuple)):
            paths = [v for v in value if isinstance(v, str)]
        elif key.endswith("_CLASS") and isinstance(value, str):
            paths = [value]
        else:
            continue
        for dotted in paths:
            try:
                import_string(dotted)
            except ImportError as error:
                found.append(f"REST_FRAMEWORK[{key!r}] entry {dotted!r} cannot be imported: {error}")
    return found


def later_overrides(namespace: Mapping[str, Any], store: Mapping[str, Any]) -> dict[str, Any]:
    """The settings the page's later blocks run with: the snippet's TASKS, REST_FRAMEWORK and
    REST_KNOX, and its FDBQUEUE's behaviour (not its store: ``store`` stays)."""
    overrides = {name: namespace[name] for name in APPLIED if name in namespace}
    options = namespace.get("FDBQUEUE")
    if isinstance(options, Mapping):
        chosen = {key: options[key] for key in APPLIED_FDBQUEUE_KEYS if key in options}
        if chosen:
            overrides["FDBQUEUE"] = {**store, **chosen}
    return overrides
