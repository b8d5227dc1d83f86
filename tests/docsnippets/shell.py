"""The commands a ```console block may run: ``python manage.py ...`` and ``curl ...``, in-process,
plus the shell bits that glue them: ``NAME=value``, ``export NAME=value``, ``NAME=$(command)``,
``$NAME`` / ``${NAME}`` (not inside single quotes), and ``NAME=value command`` for one command's
environment. Pipes, redirections, ``&&`` and other programs are refused with a message.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shlex
import traceback
from typing import Any, Iterator
from unittest import mock

from .curl import run_curl
from .errors import SnippetFailure

CAPTURE = re.compile(r"(?:export\s+)?(?P<name>[A-Za-z_]\w*)=\$\((?P<command>.*)\)")
ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z_]\w*)=(?P<value>.*)", re.S)
VARIABLE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_]\w*)\}|(?P<plain>[A-Za-z_]\w*))")
OPERATORS = {"|", "||", "&&", "&", ";", ">", ">>", "<", "2>", "2>&1", "&>"}
MANAGE = (["python", "manage.py"], ["python3", "manage.py"], ["./manage.py"])
#: Commands that run until stopped, or wait for a person: not for a test.
FOREVER = {"runserver", "shell", "dbshell", "runserver_plus"}
USE_BASH = (
    "the docs tests run `python manage.py ...` and `curl ...` lines only; show commands "
    "that cannot run in a test (pip, systemctl, fdbcli, a server...) in a ```bash block."
)


def run(page: Any, text: str, location: str) -> tuple[int, str]:
    """Run one command line of the page's shell session; its exit status and output (standard
    output and error, as a terminal shows them)."""
    code, output, _ = run_captured(page, text, location)
    return code, output


def run_captured(page: Any, text: str, location: str) -> tuple[int, str, str]:
    """Run one command line: its exit status, its output, and its standard output alone."""
    capture = CAPTURE.fullmatch(text)
    if capture:
        code, output, stdout = run_captured(page, capture["command"], location)
        if code:
            raise SnippetFailure(location, f"`{capture['command']}` failed with exit status {code}:\n{output}")
        page.variables[capture["name"]] = stdout.rstrip("\n")  # $(...) takes standard output only
        return 0, "", ""
    words = shlex.split(expand(text, page.variables, location), comments=True)
    if any(word in OPERATORS for word in words):
        raise SnippetFailure(location, f"`{text}` uses shell operators; {USE_BASH}")
    exported = bool(words) and words[0] == "export"
    words = words[1:] if exported else words
    env: dict[str, str] = {}
    while words and (assignment := ASSIGNMENT.fullmatch(words[0])):
        env[assignment["name"]] = assignment["value"]
        words = words[1:]
    if not words:
        page.variables.update(env)
        if exported:
            page.environment.update(env)
        return 0, "", ""
    for prefix in MANAGE:
        if words[: len(prefix)] == prefix:
            return manage(words[len(prefix) :], {**page.environment, **env}, text, location)
    if words[0] == "curl":
        code, output = run_curl(words[1:], location)
        return code, output, output
    raise SnippetFailure(location, f"`{text}` cannot run here: {USE_BASH}")


def expand(text: str, variables: dict[str, str], location: str) -> str:
    """``$NAME`` and ``${NAME}`` replaced by the session's values, as the shell does outside
    single quotes (each a single word); ``$(...)`` anywhere but ``NAME=$(...)`` is refused."""
    out: list[str] = []
    quote = None
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and quote != "'" and index + 1 < len(text):
            out.append(text[index : index + 2])
            index += 2
            continue
        if char in "'\"" and quote in (None, char):
            quote = None if quote == char else char
        elif char == "$" and quote != "'":
            if text.startswith("$(", index):
                raise SnippetFailure(location, "`$(...)` is supported only as `NAME=$(command)` on a line of its own")
            match = VARIABLE.match(text, index)
            if match:
                name = match["braced"] or match["plain"]
                if name not in variables:
                    raise SnippetFailure(location, f"${name} is not set by an earlier line of this page")
                value = variables[name]
                out.append(value.replace("\\", "\\\\").replace('"', '\\"') if quote == '"' else shlex.quote(value))
                index = match.end()
                continue
        out.append(char)
        index += 1
    return "".join(out)


class _Tee(io.StringIO):
    """Standard output: kept on its own (for ``$(...)``) and in the terminal's interleaving."""

    def __init__(self, terminal: io.StringIO) -> None:
        super().__init__()
        self.terminal = terminal

    def write(self, text: str) -> int:
        self.terminal.write(text)
        return super().write(text)


def manage(args: list[str], env: dict[str, str], text: str, location: str) -> tuple[int, str, str]:
    """``python manage.py ARGS`` in this process, as manage.py runs it (ManagementUtility):
    its exit status (from SystemExit), its output as a terminal shows it, its standard output."""
    from django.core.management import ManagementUtility

    refuse_forever(args, text, location)
    buffer = io.StringIO()
    stdout = _Tee(buffer)
    code = 0
    with (
        mock.patch.dict(os.environ, env),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(buffer),
        process_logging(),
    ):
        try:
            ManagementUtility(["manage.py", *args]).execute()
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except Exception:  # what manage.py would print before exiting 1
            traceback.print_exc(file=buffer)
            code = 1
    return code, buffer.getvalue(), stdout.getvalue()


@contextlib.contextmanager
def process_logging() -> Iterator[None]:
    """Logging as in a manage.py process: without pytest's capturing handlers on the root logger,
    so a command that logs to standard error when nothing else handles its log (the worker), or
    Python's last-resort handler, prints into the command's output as it would in a terminal."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [h for h in saved if not type(h).__module__.startswith("_pytest")]
    try:
        yield
    finally:
        root.handlers = saved


def refuse_forever(args: list[str], text: str, location: str) -> None:
    if args and args[0] in FOREVER or args[:2] == ["fdbqueue", "worker"] and "--burst" not in args:
        raise SnippetFailure(
            location,
            f"`{text}` runs until it is stopped: show it in a ```bash block (a worker can run here with --burst).",
        )
    if args and args[0] == "createsuperuser" and not {"--noinput", "--no-input"} & set(args):
        raise SnippetFailure(
            location,
            f"`{text}` asks questions: add --noinput, --username and --email, "
            "with DJANGO_SUPERUSER_PASSWORD=... before the command",
        )
