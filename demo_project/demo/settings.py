"""Settings of the demo project: django-fdbqueue on the embedded engine, with the admin, the API
and the Django Tasks backend (example tasks in ``demo/tasks.py``).

Development settings only (DEBUG on, a fixed secret key): never deploy them as they are.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-insecure-key")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_fdbqueue",
]
try:  # Django 6.0+ has the Tasks framework built in; before, the django-tasks backport provides it
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The demo's own templates: the admin Tasks page with a form that enqueues example tasks.
        "DIRS": [BASE_DIR / "demo" / "templates"],
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

WSGI_APPLICATION = "demo.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "django-fdbqueue demo API",
    "DESCRIPTION": "FIFO and double-ended priority queues stored in FoundationDB.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Serve Swagger UI's files locally: the demo must work without reaching a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# The queues' store. The embedded engine keeps it in one SQLite file beside the demo's database;
# see the README's settings reference for ENGINE "foundationdb" and the other keys.
FDBQUEUE = {
    "ENGINE": os.environ.get("FDBQUEUE_ENGINE", "embedded"),
    "PATH": BASE_DIR / "fdbqueue.sqlite3",
    "CLUSTER_FILE": os.environ.get("FDB_CLUSTER_FILE") or None,
}

# Django tasks run through the queues: tasks.default and tasks.emails, created on first use. Run
# them with `python manage.py fdbqueue worker --tasks`; the admin shows them under Queues > Tasks.
TASKS = {
    "default": {
        "BACKEND": "django_fdbqueue.tasks.FDBQueueBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"RESULT_RETENTION": 7 * 86400, "LEASE": 60},
    },
}

# The demo's welcome email task "sends" to the console: the worker that runs it prints it.
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = "demo@example.com"
