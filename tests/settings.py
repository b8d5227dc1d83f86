"""Django settings for the test suite: the demo's apps on a throw-away embedded store."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "tests-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
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
    "knox",  # API tokens (django_fdbqueue.tokens); its table is migrated like the others
    "django_fdbqueue",
]
try:  # Django 6.0+ has the Tasks framework built in; before, the django-tasks backport provides it
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")

TASKS = {
    "default": {
        "BACKEND": "django_fdbqueue.tasks.FDBQueueBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"LEASE": 30},
    },
}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "tests.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "static/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# Each test process gets its own embedded store, removed when it exits; tests that need
# isolation point PATH elsewhere through the `fdbqueue_db` fixture. A process the tests start
# (a worker, a process a test kills on purpose) makes its folder inside its parent's, so the
# parent's clean-up removes it too when the child could not remove its own.
_PARENT_DIR = os.environ.get("FDBQUEUE_TESTS_DIR")
_STORE_DIR = tempfile.mkdtemp(
    prefix="fdbqueue-tests-", dir=_PARENT_DIR if _PARENT_DIR and os.path.isdir(_PARENT_DIR) else None
)
os.environ.setdefault("FDBQUEUE_TESTS_DIR", _STORE_DIR)
atexit.register(shutil.rmtree, _STORE_DIR, ignore_errors=True)
FDBQUEUE = {
    "ENGINE": "embedded",
    "PATH": os.path.join(_STORE_DIR, "fdbqueue.sqlite3"),
}
