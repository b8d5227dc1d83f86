"""The admin's "Workflows" entry beside Tasks: a proxy of the placeholder, with no table and no
permissions of its own (see ``models``)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("fdbqueue", "0003_access")]

    operations = [
        migrations.CreateModel(
            name="WorkflowsEntry",
            fields=[],
            options={
                "verbose_name": "workflows",
                "verbose_name_plural": "workflows",
                "proxy": True,
                "default_permissions": (),
            },
            bases=("fdbqueue.queue",),
        )
    ]
