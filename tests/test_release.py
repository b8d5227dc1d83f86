"""The package as users get it: the wheel holds the app and nothing else, the sdist what a rebuild
needs, the metadata says what is supported, the version is written once, and the hosted CI's
workflows call the same scripts as a local run.

The sdist and wheel are the ones ``./scripts/check-release`` built (the folder ``FDBQUEUE_DIST``
names, set by ``./scripts/test`` and ``./scripts/test-lowest``); without it these tests build
them. ``./scripts/test-lowest`` runs the suite against the installed wheel and sets
``FDBQUEUE_EXPECT_INSTALLED=1``: the first test then proves that the app every test imports,
in this process and in the processes tests start, is that wheel's.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

import django_fdbqueue

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
INSTALLED = os.environ.get("FDBQUEUE_EXPECT_INSTALLED") == "1"
VERSION = django_fdbqueue.__version__
PACKAGE = Path(django_fdbqueue.__file__).resolve().parent
BUILD_SECONDS = 300


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Path:
    """The folder with the sdist and the wheel."""
    if os.environ.get("FDBQUEUE_DIST"):
        return Path(os.environ["FDBQUEUE_DIST"])
    assert not INSTALLED, "FDBQUEUE_DIST must name the folder of the installed wheel"
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=BUILD_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"python -m build failed (the release extra installs build):\n{done.stderr}"
    return out


def one(folder: Path, pattern: str) -> Path:
    (found,) = folder.glob(pattern)
    return found


@pytest.fixture(scope="session")
def wheel_names(dist) -> list[str]:
    wheel = one(dist, "*.whl")
    assert wheel.name == f"django_fdbqueue-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


@pytest.fixture(scope="session")
def metadata(dist):
    with zipfile.ZipFile(one(dist, "*.whl")) as archive:
        text = archive.read(f"django_fdbqueue-{VERSION}.dist-info/METADATA").decode()
    return email.parser.Parser().parsestr(text)


def project_files(names: list[str], prefix: str = "") -> set[str]:
    """The app's files among an archive's names, relative to the app's folder."""
    start = f"{prefix}django_fdbqueue/"
    return {name.removeprefix(start) for name in names if name.startswith(start) and not name.endswith("/")}


def test_the_suite_imports_the_app_it_means_to_test():
    """The installed wheel under test-lowest (in a process started as tests start them too, with
    PYTHONPATH naming the repository); in a checkout's run, this checkout."""
    child = subprocess.run(
        [sys.executable, "-c", "import django_fdbqueue; print(django_fdbqueue.__file__)"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=True,
    )
    in_child = Path(child.stdout.strip()).resolve().parent
    if INSTALLED:
        site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
        assert PACKAGE == in_child == site_packages / "django_fdbqueue"
        assert not (ROOT / "django_fdbqueue").exists(), "the app's source is beside the tests"
        origin = importlib.metadata.distribution("django-fdbqueue").read_text("direct_url.json") or ""
        assert '"editable": true' not in origin, "an editable install"
    else:
        assert PACKAGE == in_child == ROOT / "django_fdbqueue"


def test_the_installed_wheel_is_the_one_built(dist):
    """Under test-lowest the installed files are the wheel's, byte for byte (their hashes)."""
    installed = importlib.metadata.distribution("django-fdbqueue")
    if not INSTALLED:
        assert installed.version == VERSION
        return
    with zipfile.ZipFile(one(dist, "*.whl")) as archive:
        built = archive.read(f"django_fdbqueue-{VERSION}.dist-info/RECORD").decode()
    assert app_rows(installed.read_text("RECORD") or "") == app_rows(built)


def app_rows(record: str) -> set[str]:
    """The app's files and hashes in a RECORD, less the bytecode pip compiles at install."""
    return {row for row in record.splitlines() if row.startswith("django_fdbqueue/") and "__pycache__" not in row}


def test_the_wheel_holds_the_app_and_nothing_else(wheel_names):
    outside = [
        name
        for name in wheel_names
        if not name.startswith(("django_fdbqueue/", f"django_fdbqueue-{VERSION}.dist-info/"))
    ]
    assert outside == [], "only the app goes into the wheel: no tests, docs or demo"
    assert [name for name in wheel_names if "__pycache__" in name or name.endswith(".pyc")] == []
    shipped = project_files(wheel_names)
    for needed in (
        "py.typed",
        "migrations/0001_initial.py",
        "templates/admin/django_fdbqueue/",
        "static/django_fdbqueue/",
        "testing/plugin.py",
    ):
        assert any(name.startswith(needed) for name in shipped), needed
    on_disk = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert sorted(on_disk - shipped) == [], "files of the app the wheel leaves out"


#: The bench's project-vs-references parts, moved out of the app into the repository's benchmarks/
#: (issues 32 and 38): the references, the recipe's runner, the comparison strategies, the tasks
#: rows, the goals and the chart.
BENCH_REFERENCES = (
    "redis_ref",
    "sqlite_ref",
    "tasks_db_ref",
    "tasks_db_child",
    "tasks_db_settings",
    "recipe_ref",
    "recipe_source",
    "goals",
    "plot",
    "task_rows",
    "task_run",
    "tasks",
)
#: What a user runs on their own store: the bench's rows on the service, its report, and its hook.
BENCH_SHIPPED = (
    "references",
    "suite",
    "plan",
    "measure",
    "runner",
    "workloads",
    "service_target",
    "strategies",
    "report",
    "results",
)


def test_the_wheel_leaves_the_bench_references_out(wheel_names):
    """The bench ships what a user runs on their own store, and its hook; the references stay in a clone."""
    shipped = project_files(wheel_names)
    assert sorted(shipped & {f"bench/{name}.py" for name in BENCH_REFERENCES}) == []
    assert [name for name in wheel_names if name.startswith("benchmarks/")] == []
    assert {f"bench/{name}.py" for name in BENCH_SHIPPED} | {"cli/bench.py"} <= shipped


def test_the_sdist_holds_what_a_rebuild_needs(dist, wheel_names):
    top = f"django_fdbqueue-{VERSION}/"
    with tarfile.open(one(dist, "*.tar.gz")) as archive:
        names = archive.getnames()
    assert {f"{top}{name}" for name in ("pyproject.toml", "README.md", "LICENSE", "PKG-INFO")} <= set(names)
    assert sorted(project_files(wheel_names) - project_files(names, top)) == []
    for left_out in ("tests/", "docs/", "demo_project/", "scripts/", ".github/", "benchmarks/"):
        assert not [name for name in names if name.startswith(top + left_out)], left_out
    assert [name for name in names if "__pycache__" in name or name.endswith(".pyc")] == []


def test_the_metadata_says_what_is_supported(metadata):
    assert (metadata["Name"], metadata["Version"]) == ("django-fdbqueue", VERSION)
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().strip() == (ROOT / "README.md").read_text(encoding="utf-8").strip()
    urls = dict(url.split(", ", 1) for url in metadata.get_all("Project-URL"))
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert all(url.startswith("https://") for url in urls.values())
    assert "Typing :: Typed" in metadata.get_all("Classifier")


def classified(metadata, prefix: str) -> set[str]:
    versioned = re.compile(re.escape(prefix) + r"\d+\.\d+")
    return {c.removeprefix(prefix) for c in metadata.get_all("Classifier") if versioned.fullmatch(c)}


def test_the_classifiers_are_what_the_hosted_ci_tests(metadata):
    """Python and Django versions: the classifiers name exactly the tests workflow's matrix."""
    tests = yaml.safe_load((WORKFLOWS / "tests.yml").read_text(encoding="utf-8"))
    matrix = tests["jobs"]["suite"]["strategy"]["matrix"]
    assert classified(metadata, "Programming Language :: Python :: ") == set(matrix["python"])
    assert classified(metadata, "Framework :: Django :: ") == set(matrix["django"])


def test_the_version_is_written_once():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "django_fdbqueue.__version__"}
    assert importlib.metadata.version("django-fdbqueue") == VERSION


def workflows() -> dict[str, dict]:
    return {path.name: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(WORKFLOWS.glob("*.yml"))}


def test_the_workflows_pin_actions_and_grant_least_privilege():
    """Actions by full commit, no permission by default: each job asks for what it needs."""
    assert set(workflows()) == {"lint.yml", "tests.yml", "release.yml", "simulation.yml"}
    for name, workflow in workflows().items():
        assert workflow["permissions"] == {}, name
        for job_name, job in workflow["jobs"].items():
            assert job.get("permissions") and "timeout-minutes" in job, (name, job_name)
            for step in job["steps"]:
                if "uses" in step:
                    assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), (name, step["uses"])
    publish = workflows()["release.yml"]["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"} and publish["environment"]["name"] == "pypi"


def test_the_workflows_run_the_local_scripts():
    """What the hosted CI runs is ./scripts/..., never a second copy of their steps."""
    runs = [
        step["run"]
        for workflow in workflows().values()
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if "run" in step
    ]
    for script in ("./scripts/test ", "./scripts/test-lowest", "./scripts/check-release"):
        assert any(script in run for run in runs), script
    assert not [run for run in runs if "pytest" in run or "ruff" in run or "twine" in run]
