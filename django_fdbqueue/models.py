"""A placeholder model so the queues get an admin section and real permissions.

Queues live in FoundationDB, not in the SQL database, so the model is unmanaged: no table is
ever created or queried. It exists because Django derives two things from a registered model:
the "FDB queues > Queues" entry on the admin index, and the view/add/change/delete permissions
(``fdbqueue.view_queue`` and so on) that staff users must hold to see or operate the queues.

The proxies below are the app's other entries on the admin index and in its sidebar (Tasks,
Schedules, Activity, API tokens): each leads to its pages (``admin.entries``). They have no
permissions of their own (``default_permissions = ()``): each page keeps its own rules.

The grants and token scopes (``QueueGrant``, ``TokenScope``) are the rows ``access`` reads. They
check what they store with ``rights``, never with ``access``, so the imports point one way.
"""

from typing import Any, Iterable, TypeVar

import django
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.dispatch import Signal

from django_fdbqueue.rights import canonical_rules, join_actions, parse_actions, parse_pattern


class Queue(models.Model):
    """Stands for one named queue in the store; never saved, loaded or queried."""

    name = models.CharField(max_length=200, primary_key=True)

    class Meta:
        managed = False
        verbose_name = "queue"
        verbose_name_plural = "queues"
        # With view_queue and delete_queue (Django's own), each gives its action on every queue
        # (django_fdbqueue.access); add_queue and change_queue give nothing there.
        permissions = [
            ("push_queue", "Can push to every queue"),
            ("consume_queue", "Can consume from every queue"),
            ("manage_queue", "Can manage every queue"),
        ]

    def __str__(self) -> str:
        return self.name


class TasksEntry(Queue):
    """The admin's "Tasks" entry: the task pages."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = verbose_name_plural = "tasks"


class WorkflowsEntry(Queue):
    """The admin's "Workflows" entry: the workflow pages."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = verbose_name_plural = "workflows"


class SchedulesEntry(Queue):
    """The admin's "Schedules" entry: the periodic schedules page."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = verbose_name_plural = "schedules"


class ActivityEntry(Queue):
    """The admin's "Activity" entry: the activity charts."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = verbose_name_plural = "activity"


class TokensEntry(Queue):
    """The admin's "API tokens" entry: the token pages."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = verbose_name_plural = "API tokens"


# --- access: grants and token scopes (django_fdbqueue.access reads them) -----------------------------


def validate_pattern(value: Any) -> None:
    """A queue-name pattern (``orders``, ``orders.*`` or ``*``), or a ValidationError saying why not."""
    try:
        parse_pattern(value)
    except ValueError as error:
        raise ValidationError(str(error), code="invalid_pattern") from None


def validate_actions(value: Any) -> None:
    """Comma-separated actions (``push,consume``), or a ValidationError naming the actions there are."""
    try:
        parse_actions(value)
    except ValueError as error:
        raise ValidationError(str(error), code="invalid_actions") from None


def grant_check_constraint(condition: models.Q, name: str) -> models.CheckConstraint:
    # Django 5.1 renamed CheckConstraint's ``check`` to ``condition`` (and 6.0 drops ``check``).
    if django.VERSION >= (5, 1):
        return models.CheckConstraint(name=name, condition=condition)
    # django-stubs describe Django 6, which has dropped ``check``.
    return models.CheckConstraint(name=name, check=condition)  # type: ignore[call-arg]


#: Sent after a bulk write of grants or scopes, which sends no per-row signal (``QuerySet.update``,
#: ``bulk_create``, ``bulk_update``): ``access.signals`` drops the cached rights on it, as on a save.
rights_changed = Signal()

_M = TypeVar("_M", bound=models.Model)


class RightsQuerySet(models.QuerySet[_M]):
    """Grants' and scopes' rows: bulk writes are checked as ``save`` checks one row, and tell
    ``access`` (``rights_changed``) so no process keeps rights the database no longer gives.
    (``delete`` needs nothing: Django sends ``post_delete`` per row when a receiver listens.)"""

    def update(self, **kwargs: Any) -> int:
        count = super().update(**kwargs)
        rights_changed.send(sender=self.model)
        return count

    def bulk_create(self, objs: Iterable[_M], *args: Any, **kwargs: Any) -> list[_M]:
        objs = list(objs)
        for obj in objs:
            check = getattr(obj, "check_before_save", None)
            if check is not None:
                check()
        created = super().bulk_create(objs, *args, **kwargs)
        rights_changed.send(sender=self.model)
        return created

    def bulk_update(self, objs: Iterable[_M], fields: Any, *args: Any, **kwargs: Any) -> int:
        count = super().bulk_update(objs, fields, *args, **kwargs)
        rights_changed.send(sender=self.model)
        return count


#: A grant names a user or a group, never both and never neither.
ONE_GRANTEE = models.Q(user__isnull=False, group__isnull=True) | models.Q(user__isnull=True, group__isnull=False)


class QueueGrant(models.Model):
    """Actions on the queues a pattern matches, granted to one user or one group.

    ``actions`` is a comma-separated string in canonical order (``"push,consume"``) rather than
    five booleans: it reads as token scopes are written (``push,consume:orders.*``), and an action
    added later needs no migration. Saving validates it and the pattern, so nothing invalid is
    stored even outside a form.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="queue_grants"
    )
    group = models.ForeignKey(
        "auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="queue_grants"
    )
    pattern = models.CharField(
        max_length=202,
        validators=[validate_pattern],
        help_text="A queue name, a prefix such as orders.* or * for every queue.",
    )
    actions = models.CharField(
        max_length=64, validators=[validate_actions], help_text="Comma-separated: view, push, consume, manage, delete."
    )
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = RightsQuerySet["QueueGrant"].as_manager()

    class Meta:
        verbose_name = "queue grant"
        verbose_name_plural = "queue grants"
        constraints = [grant_check_constraint(ONE_GRANTEE, "fdbqueue_grant_one_grantee")]

    def __str__(self) -> str:
        grantee = f"user {self.user}" if self.user_id else f"group {self.group}"
        return f"{self.actions} on {self.pattern} to {grantee}"

    def clean(self) -> None:
        """Exactly one grantee; the actions in canonical order."""
        if (self.user_id is None) == (self.group_id is None):
            raise ValidationError(
                "A grant is to one user or to one group: give exactly one of them.", code="one_grantee"
            )
        try:
            self.actions = join_actions(parse_actions(self.actions))
        except ValueError:
            pass  # the field's validator reports it

    def check_before_save(self) -> None:
        """A bad pattern, action or grantee is a ValidationError (``save`` and ``bulk_create``)."""
        self.clean_fields(exclude=["user", "group", "created_by"])
        self.clean()

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Validate first: a bad pattern, action or grantee is a ValidationError and nothing is stored."""
        self.check_before_save()
        super().save(*args, **kwargs)


class TokenScope(models.Model):
    """What one API token may do, narrower than its user: rules written ``action[,action]:pattern``.

    Keyed by the knox token's ``digest`` (its primary key) instead of a one-to-one field, so the
    model, its migration and this app load in projects without django-rest-knox (a relation to
    ``knox.AuthToken`` would make knox a dependency of the migration). The scope row is deleted
    with its token (a signal, see ``access.signals``); a token without a row has its user's rights.
    """

    digest = models.CharField(max_length=128, primary_key=True)
    token_key = models.CharField(max_length=25, db_index=True, help_text="The token's prefix, for people.")
    rules = models.JSONField(default=list, help_text='Such as ["push:orders.*", "consume,view:orders.*"].')
    created = models.DateTimeField(auto_now_add=True)

    objects = RightsQuerySet["TokenScope"].as_manager()

    class Meta:
        verbose_name = "token scope"
        verbose_name_plural = "token scopes"

    def __str__(self) -> str:
        return f"{self.token_key}: {' '.join(self.rules)}"

    def check_before_save(self) -> None:
        """The rules in canonical form; a malformed one is a ValidationError (``save``, ``bulk_create``)."""
        try:
            self.rules = canonical_rules(self.rules)
        except ValueError as error:
            raise ValidationError({"rules": str(error)}, code="invalid_scope") from None

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Validate the rules first: a malformed one is a ValidationError and nothing is stored."""
        self.check_before_save()
        super().save(*args, **kwargs)
