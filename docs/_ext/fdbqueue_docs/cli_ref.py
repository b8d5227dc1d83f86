"""reference/cli.md: the management commands, read from their real argparse parsers.

Each command's parser is built the way ``manage.py`` builds it (``create_parser``), and its
sub-parsers are walked, so every subcommand and option on the page is one the command accepts.
"""

from __future__ import annotations

import argparse
import os
from contextlib import contextmanager
from typing import Iterator

from . import markdown as md

COMMANDS = ("fdbqueue", "fdbqueue_demo")
# Options every Django management command has: listed once, not under every subcommand.
DJANGO_OPTIONS = {
    "--version",
    "--verbosity",
    "--settings",
    "--pythonpath",
    "--traceback",
    "--no-color",
    "--force-color",
    "--skip-checks",
    "--help",
}


@contextmanager
def _fixed_width(columns: int = 100) -> Iterator[None]:
    """argparse wraps usage to the terminal: make it the same on every machine."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def build_parser(command: str) -> argparse.ArgumentParser:
    from django.core.management import load_command_class

    return load_command_class("django_fdbqueue", command).create_parser("manage.py", command)


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each direct subcommand, in the parser's order."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((name, helps.get(name, ""), sub))
    return found


def walk(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """Every (full name, help, parser) below ``parser``, depth first."""
    for name, help_text, sub in subcommands(parser):
        yield f"{path} {name}", help_text, sub
        yield from walk(sub, f"{path} {name}")


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            return md.code(names)
        metavar = action.metavar or action.dest.upper()
        return md.code(f"{names} {metavar if isinstance(metavar, str) else ' '.join(metavar)}")
    return md.code(action.metavar or action.dest)


def _details(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    help_text = formatter._expand_help(action) if action.help else ""
    extra = []
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        extra.append("one of " + ", ".join(md.code(c) for c in action.choices))
    if (
        action.option_strings
        and action.nargs != 0
        and action.default not in (None, argparse.SUPPRESS)
        and "default" not in help_text.lower()
    ):
        default = action.default
        extra.append("default " + md.code('""' if default == "" else default))
    if action.required and action.option_strings:
        extra.append("required")
    tail = f" ({'; '.join(extra)})" if extra else ""
    return md.text(help_text) + tail


def options_table(parser: argparse.ArgumentParser, *, skip: set[str] = frozenset()) -> str:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        if set(action.option_strings) & skip:
            continue
        rows.append([_argument(action), _details(action, formatter)])
    return md.table(["Argument", "Meaning"], rows) if rows else ""


def _description(parser: argparse.ArgumentParser) -> str:
    text = parser.description or ""
    if any(line.startswith(" ") for line in text.splitlines()):
        return md.fenced(text)
    return "\n\n".join(md.text(p) for p in text.split("\n\n") if p.strip()) + "\n"


def label(name: str) -> str:
    return "cli-" + md.slug(name)


def render_command(command: str) -> str:
    with _fixed_width():
        parser = build_parser(command)
        out = [
            f"({label(command)})=\n## `manage.py {command}`\n",
            _description(parser),
            md.fenced(parser.format_usage().strip()),
            options_table(parser),
        ]
        entries = list(walk(parser, command))
        if entries:
            out.append(
                md.table(
                    ["Subcommand", "What it does"],
                    [[f"{{ref}}`{name} <{label(name)}>`", md.text(h)] for name, h, _ in entries],
                )
            )
        for name, help_text, sub in entries:
            out += [
                f"({label(name)})=\n### `{name}`\n",
                _description(sub) if sub.description else md.text(help_text),
                md.fenced(sub.format_usage().strip()),
                options_table(sub, skip=DJANGO_OPTIONS),
            ]
    return "\n".join(part for part in out if part)


def render() -> str:
    return "\n".join(render_command(command) for command in COMMANDS)
