"""The app's configuration: its label and the registration of its system checks."""

from django.apps import AppConfig
from django.core import checks


class FDBQueueConfig(AppConfig):
    name = "django_fdbqueue"
    label = "fdbqueue"
    verbose_name = "FDB queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registered here rather than at import so the checks exist only when the app is installed.
        from django_fdbqueue.checks import check_declared_schedules, check_settings

        checks.register(check_settings, "fdbqueue")
        checks.register(check_declared_schedules, "fdbqueue")
        # Grants, scopes and permissions changed in this process apply at once (access.rules' cache).
        from django_fdbqueue.access import signals

        signals.connect()
