"""The subcommands of ``manage.py fdbqueue``, one module per group, found through a registry.

The management command (``management/commands/fdbqueue.py``) only builds the parser and hands the
parsed options to a handler; everything a subcommand does lives in a module of this package. To
add subcommands, write a module that keeps the contract (``register(subparsers)`` through
``base.add_subcommand``, handlers ``handler(ctx, options)``, ``--json``, exit codes from
``errors``, ``--yes`` or a prompt for what destroys) and add its dotted path to
:data:`SUBCOMMAND_MODULES`: that one line is all the wiring there is.

The contract in full is in the code map, "A subcommand of manage.py fdbqueue"
(docs/explanation/code-map.md); the exit codes are in docs/reference/cli.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.core.management.base import CommandParser

from .base import Context, UsageParser
from .errors import exit_codes

#: Dotted paths of the modules whose ``register(subparsers)`` adds subcommands, in help order.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "django_fdbqueue.cli.queues",
    "django_fdbqueue.cli.items",
    "django_fdbqueue.cli.leases",
    "django_fdbqueue.cli.worker",
    "django_fdbqueue.cli.bench",
    "django_fdbqueue.cli.tokens",
    "django_fdbqueue.cli.schedules",
    "django_fdbqueue.cli.workflows",
    "django_fdbqueue.cli.simulate",
)

__all__ = ["SUBCOMMAND_MODULES", "Context", "add_subcommands", "run"]


def add_subcommands(parser: CommandParser) -> None:
    """Give the command's parser one sub-parser per subcommand of every registered module."""
    subparsers = parser.add_subparsers(
        title="subcommands",
        dest="subcommand",
        metavar="SUBCOMMAND",
        required=True,
        parser_class=UsageParser,
    )
    for dotted_path in SUBCOMMAND_MODULES:
        import_module(dotted_path).register(subparsers)
    # Django before 5.1 does not pass this on to sub-parsers; without it, a usage error typed on
    # the command line would not print the usage the way argparse does.
    for subparser in subparsers.choices.values():
        subparser.called_from_command_line = parser.called_from_command_line


def run(ctx: Context, options: dict[str, Any]) -> None:
    """Call the chosen subcommand's handler, turning the errors it lets through into exit codes."""
    handler = options["handler"]
    with exit_codes():
        handler(ctx, options)
