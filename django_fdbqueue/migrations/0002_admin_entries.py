"""The admin's entries beside Queues (Tasks, Schedules, Activity, API tokens): proxies of the
placeholder, with no table and no permissions of their own (see ``models``)."""

from django.db import migrations

ENTRIES = (
    ("ActivityEntry", "activity"),
    ("SchedulesEntry", "schedules"),
    ("TasksEntry", "tasks"),
    ("TokensEntry", "API tokens"),
)


class Migration(migrations.Migration):
    dependencies = [("fdbqueue", "0001_initial")]

    operations = [
        migrations.CreateModel(
            name=name,
            fields=[],
            options={"verbose_name": plural, "verbose_name_plural": plural, "proxy": True, "default_permissions": ()},
            bases=("fdbqueue.queue",),
        )
        for name, plural in ENTRIES
    ]
