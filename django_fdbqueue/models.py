"""A placeholder model so the queues get an admin section and real permissions.

Queues live in FoundationDB, not in the SQL database, so the model is unmanaged: no table is
ever created or queried. It exists because Django derives two things from a registered model:
the "FDB queues > Queues" entry on the admin index, and the view/add/change/delete permissions
(``fdbqueue.view_queue`` and so on) that staff users must hold to see or operate the queues.

The proxies below are the app's other entries on the admin index and in its sidebar (Tasks,
Schedules, Activity, API tokens): each leads to its pages (``admin.entries``). They have no
permissions of their own (``default_permissions = ()``): each page keeps its own rules.
"""

from django.db import models


class Queue(models.Model):
    """Stands for one named queue in the store; never saved, loaded or queried."""

    name = models.CharField(max_length=200, primary_key=True)

    class Meta:
        managed = False
        verbose_name = "queue"
        verbose_name_plural = "queues"

    def __str__(self) -> str:
        return self.name


def _entry_meta(plural: str) -> type:
    """The Meta of an admin entry: a proxy without permissions, named as the index shows it."""

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = plural
        verbose_name_plural = plural

    return Meta


class TasksEntry(Queue):
    """The admin's "Tasks" entry: the task pages."""

    Meta = _entry_meta("tasks")


class SchedulesEntry(Queue):
    """The admin's "Schedules" entry: the periodic schedules page."""

    Meta = _entry_meta("schedules")


class ActivityEntry(Queue):
    """The admin's "Activity" entry: the activity charts."""

    Meta = _entry_meta("activity")


class TokensEntry(Queue):
    """The admin's "API tokens" entry: the token pages."""

    Meta = _entry_meta("API tokens")
