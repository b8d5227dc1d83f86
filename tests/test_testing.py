"""The test helpers users get: finding FoundationDB, a local cluster, CLIENT_LIBRARY, the fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from django_fdbqueue import service
from django_fdbqueue.testing import binaries, plugin
from django_fdbqueue.testing.cluster import ClusterError, LocalCluster, _alive, parse_knob, parse_latency
from django_fdbqueue.testing.cluster import main as cluster_main
from tests.cluster_helpers import need_binaries

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "fdb-cluster"


def fake_home(tmp_path: Path, *names: str) -> Path:
    """An FDB_HOME holding executable stand-ins for ``names`` (bin/fdbserver, lib/libfdb_c.so...)."""
    for name in names:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    return tmp_path


# -- finding the binaries -----------------------------------------------------------------------


def test_fdb_home_comes_first(tmp_path, monkeypatch):
    home = fake_home(tmp_path, "bin/fdbserver", "bin/fdbcli", "lib/libfdb_c.so")
    monkeypatch.setenv("FDB_HOME", str(home))
    found = binaries.find(need_library=True)
    assert found == binaries.Binaries(
        str(home / "bin/fdbserver"), str(home / "bin/fdbcli"), str(home / "lib/libfdb_c.so")
    )


def test_nothing_found_says_every_place_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("FDB_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(binaries, "SYSTEM_SERVER", (str(tmp_path / "sbin/fdbserver"),))
    monkeypatch.setattr(binaries, "SYSTEM_CLI", (str(tmp_path / "usr/fdbcli"),))
    monkeypatch.setattr(binaries, "SYSTEM_LIBRARY", (str(tmp_path / "lib/libfdb_c.so"),))
    with pytest.raises(binaries.BinariesNotFound) as caught:
        binaries.find(need_library=True)
    message = str(caught.value)
    assert "fdbserver and fdbcli and libfdb_c.so not found" in message
    for place in ("nowhere/bin/fdbserver", "sbin/fdbserver", "usr/fdbcli", "nowhere/lib/libfdb_c.so", "FDB_HOME"):
        assert place in message
    assert not binaries.available()


def test_a_file_that_is_not_executable_is_not_a_server(tmp_path, monkeypatch):
    home = fake_home(tmp_path, "bin/fdbcli", "lib/libfdb_c.so")
    (home / "bin/fdbserver").write_text("not a program")
    monkeypatch.setenv("FDB_HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(binaries, "SYSTEM_SERVER", ())
    with pytest.raises(binaries.BinariesNotFound, match="fdbserver not found"):
        binaries.find()


def test_the_script_explains_a_missing_installation(tmp_path):
    env = {**os.environ, "FDB_HOME": str(tmp_path / "nowhere"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, env=env, timeout=60)
    if result.returncode == 0:  # the machine has FoundationDB's packages installed system-wide
        subprocess.run([str(SCRIPT), "stop", result.stdout.strip()], timeout=60, check=True)
        pytest.skip("FoundationDB is installed where its packages put it")
    assert result.returncode == 2
    assert "error: FoundationDB's" in result.stderr and "FDB_HOME" in result.stderr
    assert result.stdout == ""


def test_a_cluster_needs_one_or_three_processes():
    with pytest.raises(ValueError, match="1 process"):
        LocalCluster(processes=2)


# -- a commit latency through fdbserver's knobs -------------------------------------------------------

LATENCY_KNOBS = [
    "--knob_commit_transaction_batch_interval_min=0.005",
    "--knob_commit_transaction_batch_interval_from_idle=0.005",
]


def _unstarted(tmp_path: Path, **options) -> LocalCluster:
    """A cluster that is only a folder and a port: enough to build its command line and state."""
    return LocalCluster(
        binaries=binaries.Binaries("bin/fdbserver", "bin/fdbcli", "lib/libfdb_c.so"),
        directory=tmp_path,
        ports=[4500],
        pids=[None],
        **options,
    )


def test_a_commit_latency_becomes_fdbservers_commit_batching_knobs(tmp_path):
    command = _unstarted(tmp_path, commit_latency=0.005)._command(0)
    assert command[0] == "bin/fdbserver" and command[-2:] == LATENCY_KNOBS
    # Past fdbserver's default ceiling of the batch interval (20 ms), the ceiling is raised too.
    assert "--knob_commit_transaction_batch_interval_max=0.03" in _unstarted(tmp_path, commit_latency=0.03)._command(0)
    assert not any(part.startswith("--knob") for part in _unstarted(tmp_path)._command(0))


def test_other_knobs_are_passed_as_they_are_and_win_over_the_latencys(tmp_path):
    knobs = {"knob_commit_transaction_batch_interval_min": "0.002", "max_read_transaction_life_versions": 9}
    cluster = _unstarted(tmp_path, commit_latency=0.005, knobs=knobs)
    assert cluster._command(0)[-3:] == [
        "--knob_commit_transaction_batch_interval_min=0.002",
        LATENCY_KNOBS[1],
        "--knob_max_read_transaction_life_versions=9",
    ]


def test_a_restarted_process_gets_the_same_knobs(tmp_path):
    """The knobs are in cluster.json, so the script's stop and a fault test's restart see them."""
    _unstarted(tmp_path, commit_latency=0.005, knobs={"x_y": "1"})._save()
    loaded = LocalCluster.load(tmp_path / "fdb.cluster")
    assert loaded.commit_latency == 0.005 and loaded.knobs == {"x_y": "1"}
    assert loaded._command(0)[-3:] == [*LATENCY_KNOBS, "--knob_x_y=1"]


@pytest.mark.parametrize(("text", "seconds"), [("5ms", 0.005), ("2.5 ms", 0.0025), ("0.005s", 0.005), ("1s", 1.0)])
def test_a_commit_latency_is_read_with_its_unit(text, seconds):
    assert parse_latency(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "5 sec", "-5ms", "ms", ""])
def test_a_commit_latency_without_a_unit_is_refused(text):
    with pytest.raises(ValueError, match="with its unit, such as 5ms"):
        parse_latency(text)


@pytest.mark.parametrize("seconds", [0, 1.5])
def test_a_commit_latency_out_of_range_is_refused(seconds):
    with pytest.raises(ValueError, match="more than 0 and at most 1 s"):
        LocalCluster(commit_latency=seconds)


@pytest.mark.parametrize("text", ["no_value", "=1", "bad name=1", "name=", "name=a b", "na-me=1"])
def test_a_knob_that_is_not_name_equals_value_is_refused(text):
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_knob(text)


def test_the_script_explains_a_bad_latency_or_knob_before_starting_anything(capsys):
    for arguments, message in ((["--commit-latency", "5"], "with its unit"), (["--knob", "nothing"], "NAME=VALUE")):
        with pytest.raises(SystemExit) as caught:
            cluster_main(["start", *arguments])
        assert caught.value.code == 2
        assert message in capsys.readouterr().err


def test_a_knob_fdbserver_ignored_fails_the_start(tmp_path):
    """fdbserver only warns about a knob it does not know (and runs without it): the start fails."""
    cluster = _unstarted(tmp_path, knobs={"commit_transaction_batch_intervl_min": "0.005"})
    (tmp_path / "p0.out").write_text(
        "WARNING: Invalid knob option 'commit_transaction_batch_intervl_min'\nFDBD joined cluster.\n"
    )
    with pytest.raises(ClusterError, match="fdbserver refused a knob: .*commit_transaction_batch_intervl_min"):
        cluster._check_knobs()
    (tmp_path / "p0.out").write_text("FDBD joined cluster.\n")
    cluster._check_knobs()


def test_the_plugin_gives_the_cluster_it_starts_the_commit_latency(monkeypatch):
    started = []

    class Recorded:
        def __init__(self, **options):
            started.append(options)
            self.cluster_file = "started/fdb.cluster"

        def start(self):
            return self

    monkeypatch.setattr(plugin, "_state", plugin._State())
    monkeypatch.setattr(plugin, "LocalCluster", Recorded)
    monkeypatch.delenv(plugin.ENV_CLUSTER_FILE, raising=False)
    plugin._state.commit_latency = 0.005
    assert plugin.cluster_file() == "started/fdb.cluster"
    assert started == [{"commit_latency": 0.005}]


def test_the_plugin_refuses_a_commit_latency_without_a_unit(tmp_path):
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(REPO),
        plugin.ENV_COMMIT_LATENCY: "5",
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_nothing.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 4, result.stdout + result.stderr
    assert "FDBQUEUE_TEST_COMMIT_LATENCY" in result.stderr and "with its unit" in result.stderr


@pytest.mark.cluster
def test_a_cluster_with_a_commit_latency_commits_that_slowly():
    """5 ms asked, the median of 30 commits at least 3 ms: a property of the configured server (a
    loopback cluster without the knobs commits in about 1 ms), so a loaded machine only adds to it."""
    from django_fdbqueue.bench.latency import probe
    from django_fdbqueue.conf import DEFAULT_API_VERSION
    from django_fdbqueue.engines.foundationdb import select_api_version

    need_binaries()
    fdb = select_api_version(DEFAULT_API_VERSION)
    with LocalCluster(commit_latency=0.005) as cluster:
        database = fdb.open(cluster.cluster_file)
        database.options.set_transaction_timeout(60_000)
        measured = probe(database, b"latency-probe", samples=30)
    assert measured.commit_ms >= 3.0, measured


# -- a local cluster --------------------------------------------------------------------------------


@pytest.mark.cluster
def test_the_script_starts_a_cluster_and_stops_only_what_it_started():
    need_binaries()
    env = dict(os.environ)
    started = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, env=env, timeout=150)
    assert started.returncode == 0, started.stderr
    cluster_file = Path(started.stdout.strip())
    try:
        assert cluster_file.is_file() and "@127.0.0.1:" in cluster_file.read_text()
        cluster = LocalCluster.load(cluster_file)
        assert len(cluster.pids) == 1 and all(_alive(pid) for pid in cluster.pids)
        status = subprocess.run([str(SCRIPT), "status", str(cluster_file)], capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and "The database is available" in status.stdout
    finally:
        stopped = subprocess.run([str(SCRIPT), "stop", str(cluster_file)], capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert not cluster_file.parent.exists()
    assert not any(_alive(pid) for pid in cluster.pids)


@pytest.mark.cluster
def test_three_processes_survive_the_loss_of_one(tmp_path):
    from django_fdbqueue.conf import DEFAULT_API_VERSION
    from django_fdbqueue.engines.foundationdb import select_api_version

    need_binaries()
    fdb = select_api_version(DEFAULT_API_VERSION)
    with LocalCluster(processes=3) as cluster:
        assert len(set(cluster.ports)) == 3 and cluster.redundancy == "double"
        database = fdb.open(cluster.cluster_file)
        database.options.set_transaction_timeout(60_000)
        database[b"before"] = b"1"
        cluster.kill(2)
        database[b"after"] = b"2"  # writes go on once the cluster has recovered
        assert (database[b"before"], database[b"after"]) == (b"1", b"2")
        cluster.start_process(2)
        cluster.wait_available(60)
        directory = Path(cluster.cluster_file).parent
        pids = list(cluster.pids)
    assert not directory.exists() and not any(_alive(pid) for pid in pids if pid)


# -- CLIENT_LIBRARY ---------------------------------------------------------------------------------


def _run_django(tmp_path: Path, fdbqueue: dict, code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a new process whose settings are the tests' with this FDBQUEUE, and no other
    way to find the client library (no LD_LIBRARY_PATH, no FDBQUEUE_CLIENT_LIBRARY)."""
    (tmp_path / "library_settings.py").write_text(
        f"from tests.settings import *  # noqa: F401,F403\n\nFDBQUEUE = {fdbqueue!r}\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in ("LD_LIBRARY_PATH", "FDBQUEUE_CLIENT_LIBRARY")}
    env.update(DJANGO_SETTINGS_MODULE="library_settings", PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + code],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


@pytest.mark.cluster
def test_client_library_setting_loads_the_library_without_ld_library_path(tmp_path):
    library = need_binaries().library
    fdbqueue = {
        "ENGINE": "foundationdb",
        "CLUSTER_FILE": plugin.need_cluster(),
        "CLIENT_LIBRARY": library,
        "ROOT": ("fdbqueue-test", "client-library", os.urandom(4).hex()),
    }
    result = _run_django(
        tmp_path,
        fdbqueue,
        (
            "from django.core.management import call_command\n"
            "call_command('check', '--fail-level', 'WARNING')\n"
            "from django_fdbqueue import connection, service\n"
            "db = connection.get_database()\n"
            "service.create_queue(db, 'jobs')\n"
            "service.push(db, 'jobs', 'hello')\n"
            "print(service.pop(db, 'jobs').value)\n"
            "service.delete_queue(db, 'jobs')\n"
        ),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("hello")


def test_client_library_that_is_missing_is_a_check_error(tmp_path):
    fdbqueue = {"ENGINE": "foundationdb", "CLIENT_LIBRARY": str(tmp_path / "libfdb_c.so")}
    result = _run_django(tmp_path, fdbqueue, "from django.core.management import call_command\ncall_command('check')\n")
    assert result.returncode != 0
    assert "fdbqueue.E012" in result.stderr and "does not exist" in result.stderr


def test_client_library_must_be_a_path(settings):
    from django_fdbqueue.checks import check_settings

    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": "x.sqlite3", "CLIENT_LIBRARY": 7}
    assert "fdbqueue.E012" in {message.id for message in check_settings()}


def test_client_library_set_after_start_up_is_a_warning(settings, tmp_path):
    from django_fdbqueue.checks import check_settings

    library = fake_home(tmp_path, "lib/libfdb_c.so") / "lib/libfdb_c.so"
    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(tmp_path / "x.sqlite3"), "CLIENT_LIBRARY": str(library)}
    messages = {message.id: message for message in check_settings()}
    assert "fdbqueue.W004" in messages and "restart" in messages["fdbqueue.W004"].hint


# -- the fixtures --------------------------------------------------------------------------------------


def test_fdbqueue_store_is_fresh_on_each_engine(fdbqueue_store, fdbqueue_engine, settings):
    assert settings.FDBQUEUE["ENGINE"] == fdbqueue_engine
    assert service.list_queues(fdbqueue_store).items == []
    service.create_queue(fdbqueue_store, "jobs")
    service.push(fdbqueue_store, "jobs", {"n": 1})
    assert service.pop(fdbqueue_store, "jobs").value == {"n": 1}


@pytest.mark.parametrize("engines", ["embedded", pytest.param("embedded,foundationdb", marks=pytest.mark.cluster)])
def test_the_guides_example_runs_through_the_installed_plugin(tmp_path, engines):
    """The example test of docs/howto/testing.md (its block marked ``<!-- docs-test: plugin-example -->``),
    in a project of its own, with the plugin pytest loads by itself."""
    from tests.doc_blocks import marked_blocks

    if "foundationdb" in engines:
        plugin.need_cluster()
    blocks = marked_blocks(REPO / "docs" / "howto" / "testing.md")
    (tmp_path / "test_orders.py").write_text(blocks["plugin-example"].body + "\n")
    # The page's pytest.ini names the settings, the tutorial's there and the suite's here.
    ini = blocks["pytest-ini"].body
    assert "DJANGO_SETTINGS_MODULE = mysite.settings" in ini
    (tmp_path / "pytest.ini").write_text(ini.replace("mysite.settings", "tests.settings") + "\n")
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(REPO)
    if plugin.cluster_file():
        env[plugin.ENV_CLUSTER_FILE] = plugin.cluster_file()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--fdbqueue-engines",
            engines,
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_orders.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=180,
    )
    count = len(engines.split(","))
    assert f"{count} passed" in result.stdout, result.stdout + result.stderr
    assert result.returncode == 0


def _pytest_in(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """pytest on a project's test of fdbqueue_store, in a folder of its own (no ini file)."""
    (tmp_path / "test_orders.py").write_text(
        "def test_an_order(fdbqueue_store):\n    assert fdbqueue_store is not None\n", encoding="utf-8"
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path)]
        + ["--fdbqueue-engines", "embedded", "test_orders.py"],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        timeout=120,
    )


def test_the_plugin_fails_a_run_that_finds_no_django_settings(tmp_path):
    """Without settings pytest-django skips a test that asks for ``settings``: a run of nothing
    but skips exits 0. The store fixture fails instead, saying what to set."""
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    result = _pytest_in(tmp_path, env)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "fdbqueue_store needs your Django settings" in output and "DJANGO_SETTINGS_MODULE" in output
    assert "skipped" not in output


def test_the_plugin_s_store_works_with_the_settings_named(tmp_path):
    result = _pytest_in(tmp_path, {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout and "skipped" not in result.stdout
