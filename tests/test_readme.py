"""The README's set-up steps, run as a newcomer runs them: pasted into a project fresh from
``django-admin startproject``.

Each code block of the README that a reader is told to paste or run carries a marker line,
``<!-- readme-test: NAME -->``, just above it. These tests take the blocks from the README itself
(never a copy), append the Python ones to the new project's ``settings.py`` and ``urls.py`` or
write them as a module, and run the shell ones: ``python manage.py ...`` lines as real
``manage.py`` processes, ``VAR=$(...)`` by capturing a command's output, and ``curl`` lines as
HTTP requests to the project's own ``runserver``. So a snippet that breaks (a missing import, an
app listed twice, a missing step) fails here, with the output of the step that broke.

Every process runs with a deadline and is stopped at the end; the server listens on a free
loopback port. On the ``foundationdb`` engine the project's ``FDBQUEUE`` is pointed at the test
cluster (under a ROOT of its own, deleted afterwards) after the README's settings.
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
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MARKED_BLOCK = re.compile(r"<!-- readme-test: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.S)
STEP_SECONDS = 60  # the most any one step may take on a loaded machine
PASSWORD = "readme-test-password"
ADMIN = "admin"  # the user the README's step 5 creates a token for


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


def readme_blocks() -> dict[str, str]:
    """The README's marked code blocks, by marker name."""
    blocks = {name: body for name, _language, body in MARKED_BLOCK.findall(README.read_text(encoding="utf-8"))}
    assert blocks, f"no <!-- readme-test: NAME --> block in {README}"
    return blocks


def shell_lines(block: str) -> list[list[str]]:
    """The commands of a shell block, each split into words, comments and continuations removed."""
    text = block.replace("\\\n", " ")
    return [words for line in text.splitlines() if (words := shlex.split(line, comments=True))]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Project:
    """A project made by ``startproject`` in a temporary directory, and its ``manage.py``."""

    def __init__(self, root: Path, store_setting: dict | None) -> None:
        self.root = root
        self.settings = root / "mysite" / "settings.py"
        self.urls = root / "mysite" / "urls.py"
        self.store_setting = store_setting
        # A newcomer's shell: none of the test run's DJANGO_* variables (its settings module, the
        # browser tests' DJANGO_ALLOW_ASYNC_UNSAFE, which `check --deploy` rightly refuses).
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
        self.env.update(DJANGO_SUPERUSER_PASSWORD=PASSWORD, PYTHONUNBUFFERED="1")
        self.variables: dict[str, str] = {}
        self.base_url: str | None = None
        root.mkdir()
        self.run([sys.executable, "-m", "django", "startproject", "mysite", str(root)])

    def paste(self, path: Path, snippet: str) -> None:
        """Append ``snippet`` to ``path``; on a cluster, keep FDBQUEUE pointing at the test's ROOT."""
        text = path.read_text(encoding="utf-8") + "\n\n" + snippet + "\n"
        if path == self.settings and self.store_setting is not None:
            text += f"\nFDBQUEUE = {self.store_setting!r}\n"
        path.write_text(text, encoding="utf-8")

    def run(self, command: list[str]) -> subprocess.CompletedProcess:
        done = subprocess.run(command, cwd=self.root, env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=STEP_SECONDS)
        assert done.returncode == 0, f"{shlex.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        return done

    def manage(self, lines: list[list[str]]) -> list[str]:
        """Run README ``python manage.py ...`` lines, in order, in one process (what manage.py
        does, without paying Python's and Django's start-up for each); their standard outputs.

        ``createsuperuser`` gets the answers to its questions as options (the password from the
        environment)."""
        commands = []
        for words in lines:
            assert words[:2] == ["python", "manage.py"], words
            args = words[2:]
            if args[0] == "createsuperuser":
                args += ["--noinput", "--username", ADMIN, "--email", "admin@example.com"]
            commands.append(args)
        done = self.run([sys.executable, "-c", MANAGE_LINES, json.dumps(commands)])
        results = json.loads(done.stdout.splitlines()[-1])
        for result in results:
            assert result["code"] == 0, (
                f"python manage.py {shlex.join(result['args'])} exited with {result['code']}:\n"
                f"{result['out']}\n{result['err']}"
            )
        assert len(results) == len(commands), results
        return [result["out"] for result in results]

    def shell(self, block: str, *, skip: str = "runserver") -> list[str]:
        """Run a README shell block: ``manage.py`` lines (but ``skip``), ``NAME=$(...)``, ``curl``.

        Consecutive ``manage.py`` lines share one process; what each printed is returned, and for
        a ``curl`` line the response as JSON text."""
        outputs: list[str] = []
        pending: list[tuple[str | None, list[str]]] = []

        def flush() -> None:
            results = self.manage([words for _, words in pending]) if pending else []
            for (name, _), out in zip(pending, results):
                if name:
                    self.variables[name] = out.strip()
                outputs.append(out)
            pending.clear()

        for words in shell_lines(block):
            assignment = re.fullmatch(r"(\w+)=\$\((.*)", words[0])  # NAME=$(command ...)
            if assignment:
                inner = [assignment.group(2), *words[1:]]
                inner[-1] = inner[-1].removesuffix(")")
                pending.append((assignment.group(1), inner))
            elif words[0] == "curl":
                flush()
                outputs.append(self.curl(words))
            elif words[:3] != ["python", "manage.py", skip]:
                pending.append((None, words))
        flush()
        return outputs

    def curl(self, words: list[str]) -> str:
        """A README ``curl`` line (-H and -d) as a request to the project's running server."""
        assert self.base_url, "curl before the server runs"
        headers, data, url = {}, None, None
        words = [re.sub(r"\$(\w+)", lambda match: self.variables[match.group(1)], word) for word in words[1:]]
        for flag, value in zip(words, words[1:]):
            if flag == "-H":
                name, _, header = value.partition(":")
                headers[name.strip()] = header.strip()
            elif flag == "-d":
                data = value.encode()
        url = next(word for word in words if word.startswith("http://"))
        url = re.sub(r"^http://[^/]+", self.base_url, url)
        request = urllib.request.Request(url, data=data, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=STEP_SECONDS) as response:
                body = response.read().decode()
                return json.dumps({"status": response.status, "body": json.loads(body) if body else None})
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{shlex.join(['curl', *words])}: {error.code} {error.read().decode()}") from None

    @contextmanager
    def serve(self) -> Iterator[str]:
        """``manage.py runserver`` on a free loopback port until the block ends; yields its address."""
        for _attempt in range(3):
            port = free_port()
            log = self.root / f"runserver-{port}.log"
            with open(log, "wb") as output:
                server = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                                          cwd=self.root, env=self.env, stdin=subprocess.DEVNULL, stdout=output,
                                          stderr=subprocess.STDOUT)
            try:
                if self._answers(server, port):
                    self.base_url = f"http://127.0.0.1:{port}"
                    yield self.base_url
                    return
                assert "already in use" in log.read_text(), log.read_text()  # another process took the port
            finally:
                stop(server)
                self.base_url = None
        pytest.fail("runserver found no free port in three tries")

    @staticmethod
    def _answers(server: subprocess.Popen, port: int) -> bool:
        deadline = time.monotonic() + STEP_SECONDS
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.1)  # polling a port that is not open yet, within the deadline
        return False


def stop(process: subprocess.Popen) -> int:
    """SIGTERM, then SIGKILL after STEP_SECONDS; the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
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


@pytest.fixture
def store_setting(engine_name, request) -> dict | None:
    """None on the embedded engine (the README's own FDBQUEUE is used as written); on a cluster,
    the test's FDBQUEUE (cluster file and a ROOT of its own, deleted afterwards)."""
    if engine_name == "embedded":
        return None
    request.getfixturevalue("fdbqueue_db")
    from django.conf import settings

    return {key: str(value) if isinstance(value, Path) else value for key, value in settings.FDBQUEUE.items()}


@pytest.fixture
def blocks() -> dict[str, str]:
    return readme_blocks()


def test_installing_in_a_new_project(tmp_path, store_setting, blocks):
    project = Project(tmp_path / "project", store_setting)
    project.paste(project.settings, blocks["install-settings"])
    project.paste(project.urls, blocks["install-urls"])
    project.paste(project.settings, blocks["install-tokens"])

    outputs = project.shell(blocks["install-commands"])
    listing = outputs[-2]  # `fdbqueue list`, before createsuperuser
    assert re.search(r"^jobs\s+priority\s+1\b", listing, re.M), listing

    with project.serve() as address:
        status, page = get(address + "/admin/fdbqueue/queue/")
        assert status == 200 and 'id="id_username"' in page  # the admin's login form, on the way in
        outputs = project.shell(blocks["install-api-call"])  # the token, then each curl's response
        peeked, pushed = (json.loads(out) for out in outputs[1:])
    assert peeked["status"] == 200 and peeked["body"]["name"] == "jobs" and peeked["body"]["size"] == 1
    assert pushed["status"] == 201 and pushed["body"]["priority"] == 7
    assert pushed["body"]["value"] == {"job": "thumbnail"}


ENQUEUE_AND_WAIT = """
import json, time
{enqueue}
deadline = time.monotonic() + {seconds}
while time.monotonic() < deadline and send_welcome.get_result(result.id).status != "SUCCESSFUL":
    time.sleep(0.1)  # waiting for the worker of the other process, within the deadline
{result}
print("RESULT " + json.dumps({{"status": result.status, "attempts": result.attempts,
                              "return_value": result.return_value, "later": later.status}}))
"""


def test_the_api_docs_tasks_and_static_files_in_a_new_project(tmp_path, store_setting, blocks):
    project = Project(tmp_path / "project", store_setting)
    project.paste(project.settings, blocks["install-settings"])
    project.paste(project.urls, blocks["install-urls"])
    project.paste(project.settings, blocks["install-tokens"])
    project.paste(project.settings, blocks["api-docs-settings"])
    project.paste(project.urls, blocks["api-docs-urls"])
    project.paste(project.settings, blocks["tasks-settings"])
    project.paste(project.settings, blocks["production-static"])
    module = blocks["tasks-module"]
    path = project.root / module.splitlines()[0].removeprefix("# ")
    path.parent.mkdir()
    (path.parent / "__init__.py").write_text("", encoding="utf-8")
    path.write_text(module + "\n", encoding="utf-8")

    # The deploy steps: migrate, collectstatic, check --deploy (its warnings are for DEBUG = True).
    project.shell(blocks["production-commands"])
    static_root = project.root / "staticfiles"
    for collected in ("admin/css/base.css", "django_fdbqueue/admin.css",
                      "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"):
        assert (static_root / collected).is_file(), collected

    # The README's task worker, started now so that it gets ready while the server is looked at.
    worker_line = shell_lines(blocks["tasks-worker"])[0]
    log = tmp_path / "worker.log"
    with open(log, "wb") as output:
        worker = subprocess.Popen([sys.executable, *worker_line[1:]], cwd=project.root, env=project.env,
                                  stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
    try:
        # Swagger UI from the project's own static files, not a CDN.
        with project.serve() as address:
            status, page = get(address + "/api/docs/")
            assert status == 200, page
            scripts = re.findall(r'src="([^"]+)"', page)
            assert scripts and all(src.startswith("/static/") for src in scripts), scripts
            assert "swagger-ui-bundle.js" in page and get(address + scripts[0])[0] == 200

        # A task enqueued by the README's code runs in the README's worker.
        script = ENQUEUE_AND_WAIT.format(enqueue=blocks["tasks-enqueue"], result=blocks["tasks-result"],
                                         seconds=STEP_SECONDS - 10)
        done = project.run([sys.executable, "manage.py", "shell", "-c", script])
    finally:
        assert stop(worker) == 0, log.read_text()
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert report == {"status": "SUCCESSFUL", "attempts": 1, "return_value": "sent", "later": "READY"}, log.read_text()
