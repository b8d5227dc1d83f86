"""``manage.py fdbqueue token create|list|revoke``: API tokens (django-rest-knox) from a shell.

``token create USERNAME`` prints the new token on standard output and nothing else (the note
about it goes to standard error), so ``TOKEN=$(manage.py fdbqueue token create alice)`` keeps just
the token; it is shown this once, and only its prefix can be listed later. ``token revoke`` takes
that prefix (8 characters or more) or ``--all USERNAME``, and asks first unless ``--yes``.

Exit codes as everywhere in the command: 2 for bad input (no such user or token, an ambiguous
prefix, a refused confirmation) and also when knox is not installed, since no request can work
then; 3 when the database holding the tokens fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
from contextlib import contextmanager
from typing import Any, Iterator

from django.core.management.base import CommandError

from django_fdbqueue.tokens import service as tokens

from . import confirm
from .arguments import add_yes
from .base import ActionParser, Context, add_action, add_subcommand
from .errors import EXIT_STORE, usage_error
from .output import emit, iso_utc, table

__all__ = ["register", "handle_create", "handle_list", "handle_revoke", "token_data"]


def expires_days(text: str) -> float:
    """argparse type: a number of days, more than 0 (fractions allowed). The service checks the maximum."""
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of days, got {text!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise argparse.ArgumentTypeError(f"expected more than 0 days, got {text}")
    return number


def register(subparsers: Any) -> None:
    """Add ``token`` with its actions create, list and revoke to ``manage.py fdbqueue``."""
    parser = add_subcommand(
        subparsers,
        "token",
        _no_action,
        help="Create, list and revoke API tokens (needs django-rest-knox).",
        description=(
            "API tokens for the REST API, stored by django-rest-knox as hashes: a token is shown "
            "once, when it is created; afterwards only its prefix is known."
        ),
    )
    actions = parser.add_subparsers(
        title="actions", dest="token_action", metavar="ACTION", required=True, parser_class=ActionParser
    )

    create = add_action(actions, parser, "create", handle_create, help="Create a token for a user and print it, once.")
    create.add_argument("username", metavar="USERNAME", help="The user the token acts as.")
    lifetime = create.add_mutually_exclusive_group()
    lifetime.add_argument(
        "--expires-days",
        metavar="N",
        type=expires_days,
        help=(
            f"Days until the token stops working (fractions allowed, at most {tokens.MAX_EXPIRY.days}). "
            "Default: the project's REST_KNOX[\"TOKEN_TTL\"] (knox's default is 10 hours)."
        ),
    )
    lifetime.add_argument("--no-expiry", action="store_true", help="A token that works until it is revoked.")
    create.add_argument(
        "--scope",
        metavar="ACTIONS:PATTERN",
        action="append",
        help=(
            "Narrow the token to these actions on these queues, e.g. push:orders.* or consume,view:jobs "
            "(repeatable; actions: view, push, consume, manage, delete). The token never exceeds its "
            "user's rights. Default: all of its user's rights."
        ),
    )

    listing = add_action(actions, parser, "list", handle_list, help="List tokens (prefix, user, dates), newest first.")
    listing.add_argument("username", metavar="USERNAME", nargs="?", help="Only this user's tokens.")

    revoke = add_action(
        actions, parser, "revoke", handle_revoke, help="Revoke one token by its prefix, or all of a user's."
    )
    which = revoke.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "prefix",
        metavar="TOKEN_PREFIX",
        nargs="?",
        help=f"The token's prefix as `token list` shows it ({tokens.MIN_PREFIX_LENGTH} characters at least).",
    )
    which.add_argument("--all", dest="all_of", metavar="USERNAME", help="Revoke every token of this user.")
    add_yes(revoke, "revoking")


def _no_action(ctx: Context, options: dict[str, Any]) -> None:  # pragma: no cover - argparse requires one
    raise usage_error("Name an action: token create, token list or token revoke.")


@contextmanager
def _token_errors() -> Iterator[None]:
    """The token service's refusals as exit code 2, a failing database as 3."""
    try:
        yield
    except tokens.TokenStoreError as error:
        raise CommandError(str(error), returncode=EXIT_STORE) from error
    except tokens.TokenError as error:
        raise usage_error(str(error)) from error


def token_data(record: tokens.TokenRecord, now: dt.datetime | None = None) -> dict[str, Any]:
    """A token as JSON data: everything that may be shown of it (never the token itself)."""
    return {
        "prefix": record.prefix,
        "user": record.username,
        "created": iso_utc(record.created),
        "expiry": iso_utc(record.expiry),
        "expired": record.is_expired(now),
        "scope": list(record.scope) if record.scope is not None else None,
    }


def _tokens_table(records: list[tokens.TokenRecord]) -> str:
    if not records:
        return "No tokens."
    rows = [
        (
            data["prefix"],
            data["user"],
            data["created"],
            data["expiry"] or "never",
            "expired" if data["expired"] else "active",
            " ".join(data["scope"]) if data["scope"] is not None else "all of the user's rights",
        )
        for data in (token_data(record) for record in records)
    ]
    return table(("PREFIX", "USER", "CREATED", "EXPIRES", "STATUS", "SCOPE"), rows)


def handle_create(ctx: Context, options: dict[str, Any]) -> None:
    """Create the token; print it alone on standard output, and what it is on standard error."""
    if options["no_expiry"]:
        expiry: Any = None
    elif options["expires_days"] is not None:
        expiry = dt.timedelta(days=options["expires_days"])
    else:
        expiry = tokens.DEFAULT_EXPIRY
    with _token_errors():
        user = tokens.get_user(options["username"])
        record, token = tokens.create_token(user, expiry=expiry, scope=options.get("scope"))
    if ctx.as_json:
        emit(ctx, {**token_data(record), "token": token}, "")
        return
    ctx.stdout.write(token)
    until = f"expires {iso_utc(record.expiry)}" if record.expiry else "never expires"
    scoped = f", scope {' '.join(record.scope)}" if record.scope is not None else ""
    ctx.stderr.write(
        f"Created a token for {record.username!r} (prefix {record.prefix}, {until}{scoped}). It is shown only "
        f"this once: store it now. Send it as the header 'Authorization: Token <token>'; "
        f"`token revoke {record.prefix}` revokes it.",
        style_func=lambda text: text,
    )


def handle_list(ctx: Context, options: dict[str, Any]) -> None:
    """Every token (or one user's), newest first, expired ones marked."""
    with _token_errors():
        user = tokens.get_user(options["username"]) if options["username"] else None
        records = tokens.list_tokens(user)
    emit(ctx, {"tokens": [token_data(record) for record in records]}, lambda: _tokens_table(records))


def handle_revoke(ctx: Context, options: dict[str, Any]) -> None:
    """Revoke one token by prefix or all of a user's, after a confirmation unless ``--yes``."""
    if not options["yes"]:
        confirm.ensure_can_ask(ctx, "revoke tokens")
    with _token_errors():
        if options["all_of"] is not None:
            user = tokens.get_user(options["all_of"])
            if not options["yes"]:
                count = len(tokens.list_tokens(user))
                noun = "token" if count == 1 else "tokens"
                confirm.ask(ctx, f"Revoke all {count} {noun} of {user.get_username()!r}?", "revoke the tokens")
            revoked = tokens.revoke_all(user)
            text = f"Revoked {len(revoked)} token{'' if len(revoked) == 1 else 's'} of {user.get_username()!r}."
        else:
            if not options["yes"]:
                found = tokens.find_token(options["prefix"])
                confirm.ask(
                    ctx,
                    f"Revoke token {found.prefix} of {found.username!r} (created {iso_utc(found.created)})?",
                    "revoke the token",
                )
            record = tokens.revoke_token(options["prefix"])
            revoked = [record]
            text = f"Revoked token {record.prefix} of {record.username!r}."
    emit(ctx, {"revoked": len(revoked), "tokens": [token_data(record) for record in revoked]}, text, success=True)
