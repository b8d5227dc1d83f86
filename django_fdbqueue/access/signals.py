"""Keep ``access.rules``'s cache honest: any change that can alter someone's rights drops it.

Connected in ``AppConfig.ready``: grants and scopes saved, deleted or written in bulk
(``QuerySet.update``, ``bulk_create``, ``bulk_update``: ``models.rights_changed``), groups deleted,
users put in or out of groups, permissions given or taken (to users or groups), users deleted. A knox token
deleted (revoked, expired) takes its scope with it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_delete, post_save

from .rules import forget

__all__ = ["connect"]


def _drop_scope(sender: Any, instance: Any, **kwargs: Any) -> None:
    from django_fdbqueue.models import TokenScope

    digest = getattr(instance, "digest", None)
    if isinstance(digest, str):
        TokenScope.objects.filter(digest=digest).delete()


def connect() -> None:
    """Connect the receivers (idempotent: each has a dispatch_uid)."""
    from django_fdbqueue.models import QueueGrant, TokenScope, rights_changed

    rights_changed.connect(forget, dispatch_uid="fdbqueue-access-rights-changed")
    user_model = get_user_model()
    for model in (QueueGrant, TokenScope, Group):
        for signal in (post_save, post_delete):
            signal.connect(forget, sender=model, dispatch_uid=f"fdbqueue-access-{signal}-{model.__name__}")
    post_delete.connect(forget, sender=user_model, dispatch_uid="fdbqueue-access-user-deleted")
    for through in (user_model.groups.through, user_model.user_permissions.through, Group.permissions.through):
        m2m_changed.connect(forget, sender=through, dispatch_uid=f"fdbqueue-access-m2m-{through.__name__}")
    _connect_knox()


def _connect_knox() -> None:
    from django.apps import apps

    if not apps.is_installed("knox"):
        return
    from knox.models import get_token_model

    post_delete.connect(_drop_scope, sender=get_token_model(), dispatch_uid="fdbqueue-access-token-deleted")
