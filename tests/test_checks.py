"""The FDBQUEUE system checks: each id fires on its bad setting, none fires on good settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.checks import ERROR, WARNING, run_checks
from fdb.tuple import Versionstamp

from django_fdbqueue.engines.foundationdb import client_library_error

REPO_DIR = Path(__file__).resolve().parent.parent
DEMO_DIR = REPO_DIR / "demo_project"
NO_CLIENT_LIBRARY = client_library_error() is not None


def fdbqueue_messages():
    return run_checks(tags=["fdbqueue"])


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def expect_only(settings, options, check_id):
    settings.FDBQUEUE = options
    messages = fdbqueue_messages()
    assert ids(messages) == [check_id], [str(m) for m in messages]
    message = messages[0]
    # Every message says how to fix it.
    assert message.hint
    assert message.level == (ERROR if ".E" in check_id else WARNING)
    return message


def test_the_test_settings_pass(settings):
    assert fdbqueue_messages() == []


def test_full_good_embedded_settings_pass(settings, tmp_path):
    settings.FDBQUEUE = {
        "ENGINE": "embedded",
        "PATH": tmp_path / "not" / "yet" / "there.sqlite3",
        "CLUSTER_FILE": None,
        "API_VERSION": 710,
        "TIMEOUT": 0.25,
        "RETRY_LIMIT": 0,
        "ROOT": ("app", 1, b"raw"),
        "PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
        "FAULTS": {"not_committed": 0.1, "seed": 1},
    }
    assert fdbqueue_messages() == []


def test_no_fdbqueue_setting_at_all_passes(settings):
    del settings.FDBQUEUE
    del settings.BASE_DIR
    assert fdbqueue_messages() == []


def test_good_foundationdb_settings_only_miss_the_client_library(settings, tmp_path):
    cluster_file = tmp_path / "fdb.cluster"
    cluster_file.write_text("test:test@127.0.0.1:4500\n")
    settings.FDBQUEUE = {"ENGINE": "foundationdb", "CLUSTER_FILE": str(cluster_file), "TIMEOUT": None}
    expected = ["fdbqueue.E010"] if NO_CLIENT_LIBRARY else []
    assert ids(fdbqueue_messages()) == expected


def test_e001_fdbqueue_not_a_dict(settings):
    message = expect_only(settings, [("ENGINE", "embedded")], "fdbqueue.E001")
    assert "must be a dict" in message.msg


def test_w001_unknown_key_suggests_the_right_one(settings):
    message = expect_only(settings, {"ENGNE": "embedded"}, "fdbqueue.W001")
    assert "'ENGNE'" in message.msg
    assert 'Did you mean "ENGINE"?' in message.hint


def test_e002_unknown_engine(settings):
    message = expect_only(settings, {"ENGINE": "redis"}, "fdbqueue.E002")
    assert "'redis'" in message.msg
    assert "embedded" in message.hint and "foundationdb" in message.hint


@pytest.mark.parametrize("version", [800, 740, 700, 13, "730", 730.0, True, None])
def test_e003_bad_api_version(settings, version):
    message = expect_only(settings, {"API_VERSION": version}, "fdbqueue.E003")
    assert "730" in message.msg  # the accepted range is spelled out


@pytest.mark.parametrize("version", [710, 720, 730])
def test_e003_not_for_supported_api_versions(settings, version):
    settings.FDBQUEUE = {"API_VERSION": version}
    assert fdbqueue_messages() == []


def test_e004_missing_cluster_file(settings, tmp_path):
    options = {"ENGINE": "foundationdb", "CLUSTER_FILE": str(tmp_path / "absent.cluster")}
    settings.FDBQUEUE = options
    found = ids(fdbqueue_messages())
    assert "fdbqueue.E004" in found
    assert set(found) <= {"fdbqueue.E004", "fdbqueue.E010"}


def test_e004_cluster_file_is_a_directory(settings, tmp_path):
    settings.FDBQUEUE = {"ENGINE": "foundationdb", "CLUSTER_FILE": tmp_path}
    assert "fdbqueue.E004" in ids(fdbqueue_messages())


def test_e004_cluster_file_of_the_wrong_type(settings):
    settings.FDBQUEUE = {"ENGINE": "foundationdb", "CLUSTER_FILE": 4500}
    assert "fdbqueue.E004" in ids(fdbqueue_messages())


def test_e004_not_for_the_embedded_engine(settings, tmp_path):
    # A cluster file for later (e.g. from the environment) does not matter to the embedded engine.
    settings.FDBQUEUE = {"ENGINE": "embedded", "CLUSTER_FILE": str(tmp_path / "absent.cluster")}
    assert fdbqueue_messages() == []


def test_e005_path_under_a_file(settings, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    message = expect_only(settings, {"PATH": blocker / "sub" / "db.sqlite3"}, "fdbqueue.E005")
    assert "not a directory" in message.msg


def test_e005_path_is_a_directory(settings, tmp_path):
    message = expect_only(settings, {"PATH": str(tmp_path)}, "fdbqueue.E005")
    assert "is a directory" in message.msg


@pytest.mark.parametrize("path", ["", 42])
def test_e005_path_not_a_path(settings, path):
    expect_only(settings, {"PATH": path}, "fdbqueue.E005")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_e005_directory_not_writable(settings, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        expect_only(settings, {"PATH": locked / "db.sqlite3"}, "fdbqueue.E005")
    finally:
        locked.chmod(0o700)


def test_e005_not_for_the_foundationdb_engine(settings, tmp_path):
    settings.FDBQUEUE = {"ENGINE": "foundationdb", "PATH": str(tmp_path)}
    assert "fdbqueue.E005" not in ids(fdbqueue_messages())


@pytest.mark.parametrize("timeout", [0, -1, "5", True, 1e12])
def test_e006_bad_timeout(settings, timeout):
    expect_only(settings, {"TIMEOUT": timeout}, "fdbqueue.E006")


@pytest.mark.parametrize("timeout", [None, 0.001, 5, 60.0])
def test_e006_not_for_good_timeouts(settings, timeout):
    settings.FDBQUEUE = {"TIMEOUT": timeout}
    assert fdbqueue_messages() == []


@pytest.mark.parametrize("limit", [-1, 1.5, "3", False])
def test_e007_bad_retry_limit(settings, limit):
    expect_only(settings, {"RETRY_LIMIT": limit}, "fdbqueue.E007")


@pytest.mark.parametrize(
    "root",
    ["fdbqueue", ["fdbqueue"], (object(),), (Versionstamp(),)],
    ids=["str-missing-comma", "list", "unpackable", "incomplete-versionstamp"],
)
def test_e008_bad_root(settings, root):
    message = expect_only(settings, {"ROOT": root}, "fdbqueue.E008")
    assert "trailing comma" in message.hint


def test_w002_empty_root(settings):
    expect_only(settings, {"ROOT": ()}, "fdbqueue.W002")


def test_e009_permission_class_not_importable(settings):
    message = expect_only(
        settings,
        {"PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatd"]},
        "fdbqueue.E009",
    )
    assert "IsAuthenticatd" in message.msg


@pytest.mark.parametrize(
    "classes",
    ["rest_framework.permissions.IsAuthenticated", [object]],
    ids=["string-not-list", "class-not-path"],
)
def test_e009_permission_classes_of_the_wrong_shape(settings, classes):
    expect_only(settings, {"PERMISSION_CLASSES": classes}, "fdbqueue.E009")


@pytest.mark.skipif(not NO_CLIENT_LIBRARY, reason="the FoundationDB client library is installed here")
def test_e010_foundationdb_engine_without_client_library(settings):
    message = expect_only(settings, {"ENGINE": "foundationdb"}, "fdbqueue.E010")
    assert "client packages" in message.hint
    assert "embedded" in message.hint


def test_e010_names_the_client_library_setting(settings, monkeypatch):
    """Wherever the library is installed: a library outside the loader's path is named by the
    CLIENT_LIBRARY setting the cluster guide offers, and the hint says so."""
    from django_fdbqueue.engines import foundationdb

    monkeypatch.setattr(foundationdb, "client_library_error", lambda: "libfdb_c.so: cannot open shared object file")
    message = expect_only(settings, {"ENGINE": "foundationdb"}, "fdbqueue.E010")
    assert "FDBQUEUE['CLIENT_LIBRARY']" in message.hint and "FDBQUEUE_CLIENT_LIBRARY" in message.hint
    assert "client packages" in message.hint and "embedded" in message.hint


def test_e011_faults_not_a_dict(settings):
    expect_only(settings, {"FAULTS": [0.1]}, "fdbqueue.E011")


@pytest.mark.parametrize(
    "faults",
    [{"not_comitted": 0.1}, {"not_committed": 1.5}, {"not_committed": 0.6, "unknown_applied": 0.6}],
    ids=["misspelt-kind", "over-one", "sum-over-one"],
)
def test_e011_faults_the_embedded_engine_rejects(settings, faults):
    message = expect_only(settings, {"FAULTS": faults}, "fdbqueue.E011")
    assert "not_committed" in message.hint


def test_w003_faults_with_the_foundationdb_engine(settings):
    settings.FDBQUEUE = {"ENGINE": "foundationdb", "FAULTS": {"not_committed": 0.1}}
    assert "fdbqueue.W003" in ids(fdbqueue_messages())


def test_several_problems_are_reported_together(settings):
    settings.FDBQUEUE = {"TIMEOUT": -1, "RETRY_LIMIT": -1, "ROOT": "x", "EXTRA": 1}
    assert sorted(ids(fdbqueue_messages())) == [
        "fdbqueue.E006",
        "fdbqueue.E007",
        "fdbqueue.E008",
        "fdbqueue.W001",
    ]


def run_demo_manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, **env}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    # The app from this checkout, whether or not it is pip-installed.
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), environment.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=DEMO_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_project_passes_manage_py_check():
    result = run_demo_manage("check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_manage_py_check_reports_a_bad_engine():
    # The demo reads its engine from the environment: a wrong one must stop `check` with the id.
    result = run_demo_manage("check", FDBQUEUE_ENGINE="redis")
    assert result.returncode != 0
    assert "fdbqueue.E002" in result.stderr


def test_e015_unknown_access_mode(settings):
    message = expect_only(settings, {**settings.FDBQUEUE, "ACCESS": "everyone"}, "fdbqueue.E015")
    assert "'everyone'" in message.msg and '"grants"' in message.hint


def test_w006_warns_while_any_authenticated_user_may_do_anything(settings):
    message = expect_only(settings, {**settings.FDBQUEUE, "ACCESS": "authenticated"}, "fdbqueue.W006")
    assert "every authenticated user" in message.msg


def test_access_grants_is_the_default_and_passes(settings):
    settings.FDBQUEUE = {**settings.FDBQUEUE, "ACCESS": "grants"}
    assert fdbqueue_messages() == []


SETUP_WITH_APPS = """
import sys
import django
from django.conf import settings

settings.configure(
    INSTALLED_APPS=sys.argv[1].split(","),
    FDBQUEUE={"ENGINE": "embedded", "PATH": sys.argv[2]},
)
django.setup()
print("set up")
"""


@pytest.mark.parametrize(
    ("apps", "missing"),
    [
        ("rest_framework,django_fdbqueue", "'django.contrib.contenttypes' and 'django.contrib.auth'"),
        ("django.contrib.contenttypes,rest_framework,django_fdbqueue", "'django.contrib.auth' in"),
    ],
    ids=["neither", "no-auth"],
)
def test_settings_without_auth_or_contenttypes_name_them(tmp_path, apps, missing):
    """django.setup() stops with a message naming the apps to add, not Django's "ContentType
    doesn't declare an explicit app_label" about a model the project never mentioned."""
    done = subprocess.run(
        [sys.executable, "-c", SETUP_WITH_APPS, apps, str(tmp_path / "store.sqlite3")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_DIR)},
        timeout=120,
    )
    assert done.returncode != 0 and "set up" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: django_fdbqueue needs "), done.stderr
    assert missing in last and "INSTALLED_APPS" in last


def test_settings_with_auth_and_contenttypes_set_up(tmp_path):
    apps = "django.contrib.contenttypes,django.contrib.auth,rest_framework,django_fdbqueue"
    done = subprocess.run(
        [sys.executable, "-c", SETUP_WITH_APPS, apps, str(tmp_path / "store.sqlite3")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_DIR)},
        timeout=120,
    )
    assert done.returncode == 0 and "set up" in done.stdout, done.stderr
