"""FDBQUEUE is read into QueueSettings with documented defaults, and re-read when it changes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_fdbqueue.conf import DEFAULT_FILENAME, QueueSettings, get_settings


def test_defaults_when_fdbqueue_is_empty(settings):
    settings.FDBQUEUE = {}
    conf = get_settings()
    assert conf.engine == "embedded"
    assert conf.path == str(Path(settings.BASE_DIR) / DEFAULT_FILENAME)
    assert conf.cluster_file is None
    assert conf.api_version == 730
    assert conf.timeout == 5.0
    assert conf.retry_limit is None
    assert conf.root == ("fdbqueue",)
    assert conf.permission_classes == ("rest_framework.permissions.IsAuthenticated",)
    assert conf.faults is None


def test_defaults_when_fdbqueue_is_absent(settings):
    del settings.FDBQUEUE
    assert get_settings().engine == "embedded"
    assert get_settings().root == ("fdbqueue",)


def test_path_defaults_to_the_working_directory_without_base_dir(settings):
    settings.FDBQUEUE = {}
    del settings.BASE_DIR
    assert get_settings().path == DEFAULT_FILENAME


def test_every_key_overrides_its_default(settings, tmp_path):
    settings.FDBQUEUE = {
        "ENGINE": "foundationdb",
        "PATH": tmp_path / "store.sqlite3",
        "CLUSTER_FILE": tmp_path / "fdb.cluster",
        "API_VERSION": 720,
        "TIMEOUT": 1.5,
        "RETRY_LIMIT": 7,
        "ROOT": ("myapp", 2),
        "PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
        "FAULTS": {"not_committed": 0.5, "seed": 3},
    }
    conf = get_settings()
    assert conf == QueueSettings(
        engine="foundationdb",
        path=str(tmp_path / "store.sqlite3"),
        cluster_file=str(tmp_path / "fdb.cluster"),
        api_version=720,
        timeout=1.5,
        retry_limit=7,
        root=("myapp", 2),
        permission_classes=("rest_framework.permissions.IsAdminUser",),
        faults={"not_committed": 0.5, "seed": 3},
    )
    # pathlib paths arrive as plain strings: engines and SQLite want str.
    assert isinstance(conf.path, str) and isinstance(conf.cluster_file, str)


def test_none_switches_timeout_off(settings):
    settings.FDBQUEUE = {"TIMEOUT": None}
    assert get_settings().timeout is None


def test_cached_until_the_setting_changes(settings):
    settings.FDBQUEUE = {"ROOT": ("one",)}
    first = get_settings()
    assert get_settings() is first
    settings.FDBQUEUE = {"ROOT": ("two",)}
    assert get_settings().root == ("two",)


def test_settings_are_immutable():
    conf = QueueSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        conf.engine = "foundationdb"  # type: ignore[misc]


def test_constructible_directly_with_keywords(tmp_path):
    conf = QueueSettings(engine="foundationdb", cluster_file=tmp_path / "fdb.cluster")
    assert conf.engine == "foundationdb"
    assert conf.cluster_file == str(tmp_path / "fdb.cluster")
    assert conf.path == DEFAULT_FILENAME
    assert conf.timeout == 5.0
    # Hashable even with a FAULTS dict, so it can key caches.
    hash(QueueSettings(faults={"seed": 1}))


def test_the_faults_dict_is_a_copy(settings):
    # Whatever an engine does with its copy, the project's settings stay as written.
    faults = {"seed": 1}
    settings.FDBQUEUE = {"FAULTS": faults}
    get_settings().faults["seed"] = 2
    assert faults == {"seed": 1}


@pytest.mark.parametrize(
    "options, check_id",
    [
        ([("ENGINE", "embedded")], "fdbqueue.E001"),
        ({"ENGINE": "redis"}, "fdbqueue.E002"),
        ({"TIMEOUT": "5"}, "fdbqueue.E006"),
        ({"ROOT": "fdbqueue"}, "fdbqueue.E008"),
    ],
)
def test_unusable_settings_raise_improperly_configured(settings, options, check_id):
    # Checks do not run under every server, so reading the settings refuses them too.
    settings.FDBQUEUE = options
    with pytest.raises(ImproperlyConfigured, match=check_id):
        get_settings()


def test_unknown_keys_do_not_stop_reading(settings):
    settings.FDBQUEUE = {"TIMOUT": 1}
    assert get_settings().timeout == 5.0
