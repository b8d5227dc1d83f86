"""Access (django_fdbqueue.access): the Queue placeholder's push/consume/manage permissions, queue
grants to users or groups, and API token scopes (keyed by the knox token's digest, so knox stays
optional)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import django_fdbqueue.models
from django_fdbqueue.models import ONE_GRANTEE, grant_check_constraint


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("fdbqueue", "0002_admin_entries"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="queue",
            options={
                "managed": False,
                "permissions": [
                    ("push_queue", "Can push to every queue"),
                    ("consume_queue", "Can consume from every queue"),
                    ("manage_queue", "Can manage every queue"),
                ],
                "verbose_name": "queue",
                "verbose_name_plural": "queues",
            },
        ),
        migrations.CreateModel(
            name="QueueGrant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "pattern",
                    models.CharField(
                        help_text="A queue name, a prefix such as orders.* or * for every queue.",
                        max_length=202,
                        validators=[django_fdbqueue.models.validate_pattern],
                    ),
                ),
                (
                    "actions",
                    models.CharField(
                        help_text="Comma-separated: view, push, consume, manage, delete.",
                        max_length=64,
                        validators=[django_fdbqueue.models.validate_actions],
                    ),
                ),
                ("created", models.DateTimeField(auto_now_add=True)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "group",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="queue_grants",
                        to="auth.group",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="queue_grants",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "queue grant",
                "verbose_name_plural": "queue grants",
                "constraints": [grant_check_constraint(ONE_GRANTEE, "fdbqueue_grant_one_grantee")],
            },
        ),
        migrations.CreateModel(
            name="TokenScope",
            fields=[
                ("digest", models.CharField(max_length=128, primary_key=True, serialize=False)),
                (
                    "token_key",
                    models.CharField(db_index=True, help_text="The token's prefix, for people.", max_length=25),
                ),
                (
                    "rules",
                    models.JSONField(default=list, help_text='Such as ["push:orders.*", "consume,view:orders.*"].'),
                ),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
            options={"verbose_name": "token scope", "verbose_name_plural": "token scopes"},
        ),
    ]
