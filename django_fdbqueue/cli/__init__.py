"""The subcommands of ``manage.py fdbqueue``, one module per group, found through a registry.

The management command (``management/commands/fdbqueue.py``) only builds the parser and hands the
parsed options to a handler; everything a subcommand does lives in a module of this package. To
add subcommands, write a module and add its dotted path to :data:`SUBCOMMAND_MODULES`: that one
line is all the wiring there is.

The contract a subcommand module keeps
======================================

* It defines ``register(subparsers) -> None``. ``subparsers`` is the argparse sub-parsers action;
  for each subcommand, the module calls :func:`django_fdbqueue.cli.base.add_subcommand`, which
  creates the sub-parser (with the ``--json`` option every subcommand has) and ties it to the
  handler, then adds its own arguments to the parser it gets back. Two modules registering the
  same name is an error at start-up, not a silent override.
* Each handler is ``handler(ctx: Context, options: dict[str, Any]) -> None``. ``options`` holds
  the parsed arguments by ``dest`` (plus Django's own, such as ``verbosity``). ``ctx`` carries the
  output streams, standard input, the style, ``ctx.as_json`` and ``ctx.database()``, the app's
  database handle. Handlers write only through ``ctx.stdout`` / ``ctx.stderr`` (see
  ``output.emit``), so ``call_command`` can capture them, and never call ``sys.exit``.
* With ``--json``, a successful run writes exactly one JSON document to standard output. Prompts
  and messages go to standard error.
* Outcomes map to exit codes (constants in ``errors``). 0 success; 1 nothing there (an empty pop
  or peek; raise ``errors.nothing_there(...)``); 2 bad input (raise ``errors.usage_error(...)``;
  argparse errors and every ``QueueError`` the service raises map to it on their own); 3 the store
  failed (``FDBError``, or a database that cannot be opened: also mapped on their own). A failed
  run leaves standard output empty and writes one line to standard error.
* Destructive subcommands take ``--yes`` and otherwise ask with ``confirm.ask`` (after
  ``confirm.ensure_can_ask``, which refuses when standard input is not a terminal).

Modules import lazily here (at parser-building time), so a module may import anything the app
offers without slowing down or complicating ``import django_fdbqueue``.
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
