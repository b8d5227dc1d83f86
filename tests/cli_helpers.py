"""Running ``manage.py fdbqueue`` in-process for the CLI tests: the result of a run, and a fake terminal.

Shared by test_cli.py and test_cli_leases.py so both run the command, and read its exit code,
output and errors, the same way.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

from django.core.management import call_command
from django.core.management.base import CommandError


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


class Terminal(io.StringIO):
    """Standard input as a person at a terminal: isatty() is true, the answers are given in advance."""

    def isatty(self) -> bool:
        return True


def run(*args: str, stdin: io.StringIO | None = None) -> Result:
    """Run the command like manage.py would: a CommandError becomes its exit code and stderr line."""
    out, err = io.StringIO(), io.StringIO()
    extra = {"stdin": stdin} if stdin is not None else {}
    try:
        call_command("fdbqueue", *args, stdout=out, stderr=err, **extra)
        code = 0
    except CommandError as error:
        code = error.returncode
        err.write(f"{error}\n")
    return Result(code, out.getvalue(), err.getvalue())


def ok(*args: str, stdin: io.StringIO | None = None) -> Result:
    """Run the command and insist on exit code 0 (the failure shows its stderr)."""
    result = run(*args, stdin=stdin)
    assert result.code == 0, result.err
    return result
