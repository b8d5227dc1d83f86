"""The tutorial (``docs/tutorial.md``), run as a newcomer runs it: every step, in order, from
``django-admin startproject`` to a worker running a task.

Each step's code block carries a marker line, ``<!-- tutorial-test: NAME -->``, just above it.
These tests take the blocks from the page itself (never a copy): they run the ``console`` blocks'
commands (``django-admin``, ``cd``, ``python manage.py ...`` as real processes, ``NAME=$(...)``
by capturing a command's output, ``curl`` as HTTP requests to the project's own ``runserver``)
and compare what they print with the output the page shows; they append the ``# settings.py``
and ``# urls.py`` blocks to the project's files, write ``# myapp/tasks.py`` as that module, and run
the other ``python`` blocks in ``manage.py shell``. So a step that breaks (a missing import, a
missing step, an output that changed) fails here, with the output of the step that broke. The
generic snippet runner leaves this page out for that reason.

Every process runs with a deadline and is stopped at the end; the server listens on a free
loopback port. On the ``foundationdb`` engine the project's ``FDBQUEUE`` is pointed at the test
cluster (under a ROOT of its own, deleted afterwards) after each settings block.

The last test runs the same way the how-to guides' steps that only a running project can prove:
Swagger UI served from the project's own static files after ``collectstatic``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from contextlib import ExitStack
from importlib import metadata
from itertools import groupby
from pathlib import Path
from typing import Iterator

import pytest

import django_fdbqueue.migrations
from packaging.requirements import Requirement

from tests.doc_blocks import REPO, Block, Command, assert_output, commands, marked_blocks

TUTORIAL = REPO / "docs" / "tutorial.md"
HOWTO = REPO / "docs" / "howto"
# The tutorial's steps, in page order; a step added to the page must be added to the test too.
STEPS = [
    "install",
    "startproject",
    "settings",
    "urls",
    "migrate",
    "first-queue",
    "claim-in-python",
    "tokens-settings",
    "tokens-commands",
    "api-calls",
    "tasks-settings",
    "tasks-module",
    "worker",
    "enqueue",
    "result",
]
STEP_SECONDS = 60  # the most any one step may take on a loaded machine
PASSWORD = "tutorial-test-password"
SHOWN_ADDRESS = "127.0.0.1:8000"  # where the page says runserver listens


# Runs each argument list given as JSON as `python manage.py ARGS...` would (in the project's
# directory), capturing what it prints and its exit code; stops at the first failure.
MANAGE_LINES = """
import contextlib, io, json, os, sys, traceback
sys.path.insert(0, os.getcwd())
os.environ["DJANGO_SETTINGS_MODULE"] = "mysite.settings"
from django.core.management import execute_from_command_line
results = []
for args in json.loads(sys.argv[1]):
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            execute_from_command_line(["manage.py", *args])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except Exception:
            traceback.print_exc()
            code = 1
    results.append({"args": args, "code": code, "out": out.getvalue(), "err": err.getvalue()})
    if code:
        break
print(json.dumps(results))
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop(process: subprocess.Popen, first: int = signal.SIGTERM) -> int:
    """``first`` (SIGTERM), then SIGKILL after STEP_SECONDS; the exit code."""
    if process.poll() is None:
        process.send_signal(first)
        try:
            process.wait(STEP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STEP_SECONDS)
    return process.returncode


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=STEP_SECONDS) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class Newcomer:
    """A shell in a temporary directory, following the page: its working directory, its shell
    variables, and the processes it left running (stopped by ``processes``, an ExitStack)."""

    def __init__(self, home: Path, store_setting: dict | None, processes: ExitStack) -> None:
        home.mkdir()
        self.cwd = home
        self.store_setting = store_setting
        self.processes = processes
        # A newcomer's shell: none of the test run's DJANGO_* variables (its settings module, the
        # browser tests' DJANGO_ALLOW_ASYNC_UNSAFE, which `check --deploy` rightly refuses).
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
        self.env.update(DJANGO_SUPERUSER_PASSWORD=PASSWORD, PYTHONUNBUFFERED="1")
        self.variables: dict[str, str] = {}
        self.address: str | None = None  # host:port of the running server
        self.worker: tuple[subprocess.Popen, Path, Command] | None = None

    # -- files

    def paste(self, block: Block) -> None:
        """A ``# settings.py`` or ``# urls.py`` block appended to the project's file; any other
        ``# path.py`` block written as that file. On a cluster, FDBQUEUE keeps pointing at the test's ROOT."""
        first = block.body.splitlines()[0]
        assert block.language == "python" and first.startswith("# ") and first.endswith(".py"), first
        name = first.removeprefix("# ")
        if name in ("settings.py", "urls.py"):
            path = self.cwd / "mysite" / name
            text = path.read_text(encoding="utf-8") + "\n\n" + block.body + "\n"
            if name == "settings.py" and self.store_setting is not None:
                text += f"\nFDBQUEUE = {self.store_setting!r}\n"
        else:
            path, text = self.cwd / name, block.body + "\n"
        path.write_text(text, encoding="utf-8")

    # -- commands

    def run(self, command: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run(
            command,
            cwd=self.cwd,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=STEP_SECONDS,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
        assert done.returncode == 0, f"{shlex.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        return done

    def manage(self, lines: list[list[str]]) -> list[tuple[str, str]]:
        """``manage.py`` argument lists, in order, in one process (what manage.py does, without
        paying Python's and Django's start-up for each); what each printed, (stdout, stderr)."""
        done = self.run([sys.executable, "-c", MANAGE_LINES, json.dumps(lines)])
        results = json.loads(done.stdout.splitlines()[-1])
        for result in results:
            assert result["code"] == 0, (
                f"python manage.py {shlex.join(result['args'])} exited with {result['code']}:\n"
                f"{result['out']}\n{result['err']}"
            )
        assert len(results) == len(lines), results
        return [(result["out"], result["err"]) for result in results]

    def console(self, block: Block) -> None:
        """Run a ``console`` block's commands and compare what each prints with the page."""
        pending: list[tuple[Command, list[str]]] = []  # consecutive manage.py lines, run together

        def flush() -> None:
            printed = self.manage([args for _, args in pending]) if pending else []
            for (command, _), (out, err) in zip(pending, printed):
                assert_output(command.line, command.expected, out + err)
            pending.clear()

        for command in commands(block):
            words = shlex.split(command.line, comments=True)
            assignment = re.fullmatch(r"(\w+)=\$\((.*)", words[0])  # NAME=$(command ...)
            manage = words[:2] == ["python", "manage.py"]
            if manage and (words[2:3] == ["runserver"] or words[2:4] == ["fdbqueue", "worker"]):  # they keep running
                flush()
                self.start(command, words)
            elif manage:
                pending.append(self.as_run(command, words[2:]))
            else:
                flush()
                if assignment:
                    inner = [assignment.group(2), *words[1:]]
                    inner[-1] = inner[-1].removesuffix(")")
                    out, err = self.pipeline(inner)
                    self.variables[assignment.group(1)] = out.strip()
                    assert_output(command.line, command.expected, err)
                else:
                    out, err = self.pipeline(words)
                    assert_output(command.line, command.expected, out + err)
        flush()

    @staticmethod
    def as_run(command: Command, args: list[str]) -> tuple[Command, list[str]]:
        """The command and its manage.py arguments as the test runs them: createsuperuser's
        password prompts are answered by DJANGO_SUPERUSER_PASSWORD, so it runs with --noinput,
        and the prompts the page shows are not printed."""
        if args[0] != "createsuperuser":
            return command, args
        expected = "\n".join(line for line in command.expected.splitlines() if not line.startswith("Password"))
        return Command(command.line, expected), [*args, "--noinput"]

    def pipeline(self, words: list[str]) -> tuple[str, str]:
        """``cd``, ``django-admin``, ``python manage.py`` (outside a run of them), ``curl``, each
        piped (``|``) into the next; what the last printed, (stdout, stderr)."""
        out, err = None, ""
        stages = [list(group) for is_pipe, group in _split(words, "|") if not is_pipe]
        for stage in stages:
            if stage[0] == "cd":
                assert len(stages) == 1 and len(stage) == 2, stage
                self.cwd = self.cwd / stage[1]
                return "", ""
            if stage[0] == "curl":
                out, err = self.curl(stage), ""
            elif stage[0] == "django-admin":
                done = self.run([sys.executable, "-m", "django", *stage[1:]], out)
                out, err = done.stdout, done.stderr
            elif stage[:2] == ["python", "manage.py"]:
                ((out, err),) = self.manage([stage[2:]])
            elif stage[:2] == ["python", "-c"]:
                done = self.run([sys.executable, *stage[1:]], out)
                out, err = done.stdout, done.stderr
            else:
                pytest.fail(f"the test does not know how to run {shlex.join(stage)}")
        return out or "", err

    def curl(self, words: list[str]) -> str:
        """A ``curl`` line (-H and -d; -s is curl's default here) as a request to the running
        server; the response's body, which curl prints."""
        assert self.address, "curl before the server runs"
        headers, data = {}, None
        words = [re.sub(r"\$(\w+)", lambda match: self.variables[match.group(1)], word) for word in words[1:]]
        for flag, value in zip(words, words[1:]):
            if flag == "-H":
                name, _, header = value.partition(":")
                headers[name.strip()] = header.strip()
            elif flag == "-d":
                data = value.encode()
        url = next(word for word in words if word.startswith("http://"))
        url = url.replace(f"http://{SHOWN_ADDRESS}", f"http://{self.address}")
        request = urllib.request.Request(url, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=STEP_SECONDS) as response:
                return response.read().decode().replace(self.address, SHOWN_ADDRESS)
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{shlex.join(['curl', *words])}: {error.code} {error.read().decode()}") from None

    # -- processes that keep running: the server and the worker

    def start(self, command: Command, words: list[str]) -> None:
        if words[2] == "runserver":
            self.serve(command)
            return
        log = self.cwd / "worker.log"
        with open(log, "wb") as output:
            worker = subprocess.Popen(
                [sys.executable, *words[1:]],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.processes.callback(stop, worker)
        self.worker = (worker, log, command)

    def stop_worker(self) -> None:
        """Ctrl-C, as the page says; then what it printed, from its start, against the page."""
        assert self.worker, "no worker was started"
        worker, log, command = self.worker
        assert stop(worker, signal.SIGINT) == 0, log.read_text()
        assert_output(command.line, command.expected, log.read_text())

    def serve(self, command: Command) -> None:
        """``manage.py runserver`` on a free loopback port, until the test ends."""
        for _ in range(3):
            port = free_port()
            log = self.cwd / f"runserver-{port}.log"
            with open(log, "wb") as output:
                server = subprocess.Popen(
                    [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                    cwd=self.cwd,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            self.processes.callback(stop, server)
            if _answers(server, port):
                self.address = f"127.0.0.1:{port}"
                assert_output(command.line, command.expected, log.read_text().replace(self.address, SHOWN_ADDRESS))
                return
            stop(server)
            assert "already in use" in log.read_text(), log.read_text()  # another process took the port
        pytest.fail("runserver found no free port in three tries")


def _split(words: list[str], separator: str) -> Iterator[tuple[bool, list[str]]]:
    """Consecutive runs of ``words``, split at ``separator``: (is_separator, words) pairs."""
    return ((is_separator, list(group)) for is_separator, group in groupby(words, lambda word: word == separator))


def _answers(server: subprocess.Popen, port: int) -> bool:
    deadline = time.monotonic() + STEP_SECONDS
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)  # polling a port that is not open yet, within the deadline
    return False


@pytest.fixture
def store_setting(engine_name, request) -> dict | None:
    """None on the embedded engine (the page's own FDBQUEUE is used as written); on a cluster,
    the test's FDBQUEUE (cluster file and a ROOT of its own, deleted afterwards)."""
    if engine_name == "embedded":
        return None
    request.getfixturevalue("fdbqueue_db")
    from django.conf import settings

    return {key: str(value) if isinstance(value, Path) else value for key, value in settings.FDBQUEUE.items()}


@pytest.fixture
def tutorial() -> dict[str, Block]:
    return marked_blocks(TUTORIAL, "tutorial-test")


def test_the_page_has_the_steps_this_test_runs(tutorial):
    assert list(tutorial) == STEPS


def test_the_install_step_names_extras_that_exist(tutorial):
    """The install block cannot run here (it would download), but what it names must exist: the
    extras in pyproject.toml, and their packages, which this test run has installed too."""
    lines = [line for line in tutorial["install"].body.splitlines() if line.startswith("pip install")]
    assert len(lines) == 1, tutorial["install"].body
    target = shlex.split(lines[0])[-1]
    match = re.fullmatch(r"\./[\w.-]+\[([\w,]+)\]", target)
    assert match and shlex.split(lines[0])[:3] == ["pip", "install", "-e"], lines[0]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for extra in match.group(1).split(","):
        assert extra in project["optional-dependencies"], extra
        for requirement in map(Requirement, project["optional-dependencies"][extra]):
            assert metadata.version(requirement.name) in requirement.specifier, requirement


def test_the_migrate_step_shows_every_migration_of_the_app(tutorial):
    """``...`` in "Applying x... OK" matches across lines, so the transcript's comparison cannot
    see a migration left out: each of the app's own must be on the page."""
    shown = re.findall(r"Applying fdbqueue\.(\w+)\.\.\. OK", tutorial["migrate"].body)
    folder = Path(django_fdbqueue.migrations.__file__).parent  # the app as installed (the wheel, in the lowest run)
    migrations = sorted(path.stem for path in folder.glob("0*.py"))
    assert shown == migrations


def test_the_tutorial_in_a_new_project(tmp_path, store_setting, tutorial):
    with ExitStack() as processes:
        newcomer = Newcomer(tmp_path / "home", store_setting, processes)
        newcomer.console(tutorial["startproject"])
        assert (newcomer.cwd / "manage.py").is_file() and (newcomer.cwd / "myapp" / "apps.py").is_file()
        newcomer.paste(tutorial["settings"])
        newcomer.paste(tutorial["urls"])
        newcomer.console(tutorial["migrate"])
        newcomer.console(tutorial["first-queue"])
        newcomer.run([sys.executable, "manage.py", "shell", "-c", tutorial["claim-in-python"].body])

        newcomer.paste(tutorial["tokens-settings"])
        newcomer.console(tutorial["tokens-commands"])  # ends with the server running
        status, page = get(f"http://{newcomer.address}/admin/fdbqueue/queue/")
        assert status == 200 and 'id="id_username"' in page  # the admin's login form, on the way in
        newcomer.console(tutorial["api-calls"])

        newcomer.paste(tutorial["tasks-settings"])
        newcomer.paste(tutorial["tasks-module"])
        newcomer.console(tutorial["worker"])  # started; its output is compared once it stops
        script = ENQUEUE_AND_WAIT.format(
            enqueue=tutorial["enqueue"].body, result=tutorial["result"].body, seconds=STEP_SECONDS - 10
        )
        newcomer.run([sys.executable, "manage.py", "shell", "-c", script])
        newcomer.stop_worker()


# The reader runs the two blocks in one shell session, the second "a moment later": here, once the
# worker of the other process has run the task, within a deadline.
ENQUEUE_AND_WAIT = """
import time
{enqueue}
deadline = time.monotonic() + {seconds}
while time.monotonic() < deadline and send_welcome.get_result(result.id).status != "SUCCESSFUL":
    time.sleep(0.1)  # waiting for the worker of the other process, within the deadline
{result}
"""


def test_the_howto_api_docs_and_static_files_in_a_new_project(tmp_path, store_setting, tutorial):
    """Swagger UI (docs/howto/rest-api.md) from the project's own static files, collected as
    docs/howto/production.md says: blocks marked ``<!-- docs-test: NAME -->`` there."""
    rest_api, production = marked_blocks(HOWTO / "rest-api.md"), marked_blocks(HOWTO / "production.md")
    with ExitStack() as processes:
        newcomer = Newcomer(tmp_path / "home", store_setting, processes)
        newcomer.console(tutorial["startproject"])
        for block in (
            tutorial["settings"],
            tutorial["urls"],
            tutorial["tokens-settings"],
            rest_api["api-docs-settings"],
            rest_api["api-docs-urls"],
            production["production-static"],
        ):
            newcomer.paste(block)
        deploy = production["production-commands"]
        if deploy.language == "console":
            newcomer.console(deploy)
        else:  # a bash block: its commands, without outputs to compare
            newcomer.manage(
                [
                    shlex.split(line, comments=True)[2:]
                    for line in deploy.body.splitlines()
                    if shlex.split(line, comments=True)
                ]
            )
        static_root = newcomer.cwd / "staticfiles"
        for collected in (
            "admin/css/base.css",
            "django_fdbqueue/admin.css",
            "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js",
        ):
            assert (static_root / collected).is_file(), collected

        newcomer.serve(Command("python manage.py runserver", "..."))
        address = f"http://{newcomer.address}"
        status, page = get(address + "/api/docs/")
        assert status == 200, page
        scripts = re.findall(r'src="([^"]+)"', page)
        assert scripts and all(src.startswith("/static/") for src in scripts), scripts
        assert "swagger-ui-bundle.js" in page and get(address + scripts[0])[0] == 200
