"""Which permission classes guard the API: FDBQUEUE["PERMISSION_CLASSES"], not DRF's global default.

DRF's own default is AllowAny, which would leave every queue open to anonymous clients in a project
that never configured permissions; our default (from conf) is IsAuthenticated instead, and a project
opens or tightens the API by naming classes in FDBQUEUE without touching its other DRF views.
"""

from __future__ import annotations

from functools import lru_cache

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from rest_framework.permissions import BasePermission

from django_fdbqueue.conf import get_settings


@lru_cache(maxsize=8)
def _import_classes(paths: tuple[str, ...]) -> tuple[type[BasePermission], ...]:
    classes = []
    for path in paths:
        try:
            classes.append(import_string(path))
        except ImportError as exc:
            message = f'FDBQUEUE["PERMISSION_CLASSES"]: cannot import {path!r}: {exc}'
            raise ImproperlyConfigured(message) from exc
    return tuple(classes)


def permission_classes() -> tuple[type[BasePermission], ...]:
    """The configured classes, imported (cached per distinct setting, so changes in tests apply)."""
    return _import_classes(tuple(get_settings().permission_classes))


def get_permissions() -> list[BasePermission]:
    """Fresh permission instances for one request, as DRF's APIView.get_permissions returns them."""
    return [permission_class() for permission_class in permission_classes()]
