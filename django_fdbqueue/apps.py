"""The app's configuration: its label, the apps it needs, and the registration of its system checks."""

from django.apps import AppConfig
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

#: Apps the app's models refer to (grants name users and groups; permissions, content types).
REQUIRED_APPS = ("django.contrib.contenttypes", "django.contrib.auth")


class FDBQueueConfig(AppConfig):
    name = "django_fdbqueue"
    label = "fdbqueue"
    verbose_name = "FDB queues"
    default_auto_field = "django.db.models.BigAutoField"

    def import_models(self) -> None:
        # Before the models import auth's and contenttypes' own: without those apps installed,
        # Django would stop on "ContentType doesn't declare an explicit app_label", naming neither.
        registry = self.apps
        assert registry is not None  # set by the registry that imports the models
        missing = [name for name in REQUIRED_APPS if not registry.is_installed(name)]
        if missing:
            raise ImproperlyConfigured(
                f"django_fdbqueue needs {' and '.join(repr(name) for name in missing)} in "
                "INSTALLED_APPS (its queue grants refer to users and groups): add "
                f"{', '.join(repr(name) for name in missing)} to INSTALLED_APPS, as Django's "
                "startproject settings have them."
            )
        super().import_models()

    def ready(self) -> None:
        # Registered here rather than at import so the checks exist only when the app is installed.
        from django_fdbqueue.checks import check_declared_schedules, check_settings

        checks.register(check_settings, "fdbqueue")
        checks.register(check_declared_schedules, "fdbqueue")
        # Grants, scopes and permissions changed in this process apply at once (access.rules' cache).
        from django_fdbqueue.access import signals

        signals.connect()
