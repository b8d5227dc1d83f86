"""Settings of the demo project: django-fdbqueue on the embedded engine, with the admin, the API
and the Django Tasks backend (example tasks in ``demo/tasks.py``).

Development settings only (DEBUG on, a fixed secret key): never deploy them as they are.
"""

import os
from datetime import timedelta
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
    "knox",  # API tokens stored as hashes: manage.py fdbqueue token ..., or the admin's API tokens page
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

# How API clients prove who they are, tried in this order:
# - knox tokens ("Authorization: Token <token>"): what scripts and workers should use. Only a hash
#   of each token is stored, and checking one costs a lookup and a SHA-512.
# - the session cookie of the admin's login: the browsable API and /api/docs/ in a browser.
# - HTTP basic (curl -u user:password): development only. Every request runs the password hasher
#   (about 230 ms of CPU by design), so a few clients saturate a server, and the password it sends
#   on every request also opens the admin.
# Anonymous requests get 401 with "WWW-Authenticate: Token" (the first class's challenge).
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    # The queue API takes its permissions from FDBQUEUE["PERMISSION_CLASSES"]; this default guards
    # every other DRF view, such as the API's root page, which DRF would otherwise leave open.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# Throttling (optional): requests per user (by token, session or password) and per anonymous
# address, answered 429 with Retry-After beyond the rate. DRF counts in Django's cache, here the
# default per-process memory cache: under gunicorn each worker counts on its own, so the real
# limit is the rate times the workers; a production set-up points CACHES at Redis or Memcached.
# DEMO_THROTTLE=off switches it off (load runs); DEMO_THROTTLE_USER / _ANON change the rates.
if os.environ.get("DEMO_THROTTLE", "on") != "off":
    REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ]
    REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {
        "user": os.environ.get("DEMO_THROTTLE_USER", "1200/min"),
        "anon": os.environ.get("DEMO_THROTTLE_ANON", "60/min"),
    }

# The lifetime of a token created without one (`fdbqueue token create` without --expires-days, the
# admin's "Project default"). knox's own default, 10 hours, suits log-in sessions, not API clients.
REST_KNOX = {"TOKEN_TTL": timedelta(days=30)}

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
# see docs/reference/settings.md for ENGINE "foundationdb" and the other keys.
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
