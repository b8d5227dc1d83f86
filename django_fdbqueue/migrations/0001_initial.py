"""The unmanaged Queue placeholder: recorded so Django creates its content type and permissions."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Queue",
            fields=[
                ("name", models.CharField(max_length=200, primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "queue",
                "verbose_name_plural": "queues",
                "managed": False,
            },
        ),
    ]
