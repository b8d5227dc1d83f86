"""A placeholder model so the queues get an admin section and real permissions.

Queues live in FoundationDB, not in the SQL database, so the model is unmanaged: no table is
ever created or queried. It exists because Django derives two things from a registered model:
the "FDB queues > Queues" entry on the admin index, and the view/add/change/delete permissions
(``fdbqueue.view_queue`` and so on) that staff users must hold to see or operate the queues.
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
