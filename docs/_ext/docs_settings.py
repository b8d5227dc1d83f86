"""Django settings for building the docs: the app and what its faces need, no store opened.

Sphinx imports the app (autodoc) and asks it for its parser, schema and checks, which needs a
configured Django. Nothing here reads or writes a queue store. The API's authentication follows
the installation steps (knox tokens and sessions), so the REST reference shows what a project
set up that way serves.
"""

SECRET_KEY = "docs-build-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "knox",
    "django_fdbqueue",
]
try:  # Django 6.0+ has the Tasks framework built in; before, the django-tasks backport provides it
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")

TASKS = {"default": {"BACKEND": "django_fdbqueue.tasks.FDBQueueBackend"}}

ROOT_URLCONF = "docs_urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
