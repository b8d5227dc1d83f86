"""The frame every subcommand plugs into: the invocation's Context and ``add_subcommand``.

Handlers get a :class:`Context` instead of the management command itself, so they depend only on
what they use (streams, style, the database) and can be tested or reused without a command.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError, CommandParser, OutputWrapper
from django.core.management.color import Style

from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import FDBError

from .errors import EXIT_USAGE, StoreUnavailable

__all__ = ["ActionParser", "Context", "Handler", "UsageParser", "add_action", "add_subcommand"]


@dataclass
class Context:
    """What a handler may use from the invocation: never ``sys.*`` or the Command directly."""

    stdout: OutputWrapper
    stderr: OutputWrapper
    stdin: TextIO
    style: Style
    as_json: bool = False
    _database: Any = field(default=None, repr=False)

    def database(self) -> Any:
        """The app's database handle, opened on first use.

        Failing to open it is a store error (exit 3) with a message, not a traceback: it is what
        a wrong ``FDBQUEUE`` setting or a missing client library looks like from here.
        """
        if self._database is None:
            try:
                self._database = get_database()
            except FDBError:
                raise  # mapped with the other store errors
            except Exception as error:  # noqa: BLE001 - any failure to open is reported the same way
                reason = " ".join(str(error).split()) or type(error).__name__
                raise StoreUnavailable(
                    f"The queue store cannot be opened: {reason} (`manage.py check` diagnoses the FDBQUEUE settings)."
                ) from error
        return self._database


#: A subcommand's handler: it writes its output through ``ctx`` and returns nothing.
Handler = Callable[[Context, dict[str, Any]], None]


class UsageParser(CommandParser):
    """A parser whose usage errors mean exit code 2, from ``call_command`` as from a shell.

    On the command line argparse already prints the usage and exits with 2; Django's parser
    raises ``CommandError`` (exit 1) when called from code. Exit code 1 means "nothing to pop"
    here, so a usage error must not use it.
    """

    def error(self, message: str) -> Any:
        if self.called_from_command_line:
            super().error(message)  # prints the usage and exits with 2
        raise CommandError(f"Error: {message}", returncode=EXIT_USAGE)


def add_subcommand(
    subparsers: Any, name: str, handler: Handler, *, help: str, description: str | None = None
) -> CommandParser:
    """Create the sub-parser ``name`` running ``handler``, with the options every subcommand has.

    Returns the parser, for the subcommand's own arguments. A name already taken raises
    ImproperlyConfigured: two modules claiming one subcommand is a wiring mistake to see at once.
    """
    if name in subparsers.choices:
        raise ImproperlyConfigured(f"Two fdbqueue subcommand modules register the subcommand {name!r}.")
    parser: CommandParser = subparsers.add_parser(
        name,
        help=help,
        description=description or help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--json",
        dest="as_json",
        action="store_true",
        help="Write the result as one JSON document on standard output instead of a table.",
    )
    parser.set_defaults(handler=handler)
    return parser


class ActionParser(UsageParser):
    """The parser of one ``token`` or ``workflows`` action: a usage error behaves as its parent's would.

    ``add_subcommands`` tells the top-level subcommands whether they run from a shell only after
    they are built; an action parser asks its parent parser when it needs to know.
    """

    parent: Any = None

    def error(self, message: str) -> Any:
        self.called_from_command_line = getattr(self.parent, "called_from_command_line", None)
        return super().error(message)


def add_action(actions: Any, parent: Any, name: str, handler: Any, *, help: str) -> Any:
    """An action of a subcommand with actions (``token create``, ``workflows list``), with ``--json``."""
    parser = actions.add_parser(name, help=help, description=help, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parent = parent
    # SUPPRESS: `token --json list` and `token list --json` both work, neither undoes the other.
    parser.add_argument(
        "--json",
        dest="as_json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="Write the result as one JSON document on standard output instead of a table.",
    )
    parser.set_defaults(handler=handler)
    return parser
