"""The Tasks framework's names, from Django 6.0's ``django.tasks`` or the django-tasks backport.

Django 6.0 needs Python 3.12, so it cannot be installed beside this suite's lowest Python: the
Django 6.0 branch is checked against a ``django.tasks`` made of the backport's own objects, with
Django's spelling of the one name that differs (``InvalidTask``).
"""

from __future__ import annotations

import importlib
import sys
import types

import pytest

pytest.importorskip("django_tasks")

import django_tasks  # noqa: E402
import django_tasks.backends.base  # noqa: E402
import django_tasks.base  # noqa: E402
import django_tasks.exceptions  # noqa: E402
import django_tasks.signals  # noqa: E402

from django_fdbqueue.tasks import compat  # noqa: E402


class InvalidTask(ValueError):
    """Django 6.0's name for the backport's InvalidTaskError."""


def _django_tasks_modules() -> dict[str, types.ModuleType]:
    """A ``django.tasks`` package laid out as Django 6.0's, holding the backport's objects."""
    modules = {}
    for name, source in (
        ("django.tasks", django_tasks),
        ("django.tasks.backends.base", django_tasks.backends.base),
        ("django.tasks.base", django_tasks.base),
        ("django.tasks.signals", django_tasks.signals),
    ):
        module = types.ModuleType(name)
        module.__dict__.update({k: v for k, v in vars(source).items() if not k.startswith("__")})
        modules[name] = module
    exceptions = types.ModuleType("django.tasks.exceptions")
    exceptions.InvalidTask = InvalidTask  # type: ignore[attr-defined]
    exceptions.TaskResultDoesNotExist = django_tasks.exceptions.TaskResultDoesNotExist  # type: ignore[attr-defined]
    modules["django.tasks.exceptions"] = exceptions
    modules["django.tasks.backends"] = types.ModuleType("django.tasks.backends")
    return modules


def test_on_django_6_the_frameworks_invalid_task_is_the_apps_invalid_task_error(monkeypatch):
    for name, module in _django_tasks_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    try:
        reloaded = importlib.reload(compat)
        assert reloaded.InvalidTaskError is InvalidTask
        assert reloaded.TaskResultDoesNotExist is django_tasks.exceptions.TaskResultDoesNotExist
    finally:
        monkeypatch.undo()
        importlib.reload(compat)
    assert compat.InvalidTaskError is django_tasks.exceptions.InvalidTaskError  # the backport again


@pytest.mark.parametrize(
    "value, normal",
    [({"a": (1, 2.5, None)}, {"a": [1, 2.5, None]}), (b"caf\xc3\xa9", "café"), ([True, "x"], [True, "x"])],
)
def test_normalize_json_gives_what_json_would_give_back(value, normal):
    assert compat.normalize_json(value) == normal


@pytest.mark.parametrize("value, error", [({1, 2}, TypeError), (b"\xff", ValueError), (object(), TypeError)])
def test_normalize_json_refuses_what_json_cannot_hold(value, error):
    with pytest.raises(error):
        compat.normalize_json(value)


def test_the_small_helpers():
    assert compat.get_module_path(InvalidTask) == f"{__name__}.InvalidTask"
    assert len(compat.get_random_id()) == 32 and compat.get_random_id() != compat.get_random_id()
    try:
        raise KeyError("gone")
    except KeyError as error:
        assert "KeyError: 'gone'" in compat.get_exception_traceback(error)
