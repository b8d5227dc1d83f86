"""Create, list and revoke API tokens: a thin layer over django-rest-knox's ``AuthToken``.

Why a layer at all: the admin pages and ``manage.py fdbqueue token`` must apply the same rules
(an inactive user gets no token, knox's ``TOKEN_LIMIT_PER_USER`` holds, only a superuser mints a
token that acts as a superuser, a token is named by its prefix and never shown again), and they
must fail with a clear message, not an ``ImportError`` or a traceback, when knox is missing or its
table was never migrated.

knox is imported inside the functions only, so this module (and everything importing it) loads
in a project without knox.

What is stored: knox keeps a SHA-512 digest of each token and its first 15 characters
(``token_key``), which is what people see as the token's *prefix*. The plain token exists once,
in the return value of :func:`create_token`; nothing here can produce it again.
"""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, cast

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction
from django.utils import timezone

__all__ = [
    "DEFAULT_EXPIRY",
    "MAX_EXPIRY",
    "MIN_PREFIX_LENGTH",
    "AmbiguousPrefix",
    "InvalidExpiry",
    "InvalidPrefix",
    "InvalidScope",
    "TokenError",
    "TokenLimitReached",
    "TokenNotFound",
    "TokenRecord",
    "TokenStoreError",
    "TokensUnavailable",
    "UnknownUser",
    "UserNotAllowed",
    "create_token",
    "default_expiry",
    "duration_text",
    "find_token",
    "get_user",
    "knox_installed",
    "list_tokens",
    "require_knox",
    "revoke_all",
    "revoke_token",
    "token_model",
]

#: Fewest characters of a prefix that may name a token to revoke: fewer would too easily match
#: the wrong one (the admin and ``token list`` show all 15).
MIN_PREFIX_LENGTH = 8
#: The longest lifetime a token may be given here (ten years); ``None`` means no expiry at all.
MAX_EXPIRY = dt.timedelta(days=3650)


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT_EXPIRY"


#: Pass as ``expiry`` for the project's ``REST_KNOX["TOKEN_TTL"]`` (knox's default: 10 hours).
DEFAULT_EXPIRY: Any = _Default()


# --- errors ----------------------------------------------------------------------------------------


class TokenError(Exception):
    """A token request refused, with a message for the person who made it and a stable ``code``."""

    code = "token_error"


class TokensUnavailable(TokenError):
    """django-rest-knox is not installed, or not in INSTALLED_APPS."""

    code = "tokens_unavailable"


class TokenStoreError(TokenError):
    """The database holding the tokens failed (or knox's table was never migrated)."""

    code = "token_store_error"


class UnknownUser(TokenError):
    code = "unknown_user"


class UserNotAllowed(TokenError):
    """The user may not have a token: inactive, or a superuser and the creator is not one."""

    code = "user_not_allowed"


class InvalidExpiry(TokenError):
    code = "invalid_expiry"


class InvalidScope(TokenError):
    """A scope rule that is not ``action[,action]:pattern``."""

    code = "invalid_scope"


class TokenLimitReached(TokenError):
    code = "token_limit_reached"


class InvalidPrefix(TokenError):
    """Too few characters to name one token safely."""

    code = "invalid_prefix"


class TokenNotFound(TokenError):
    code = "token_not_found"


class AmbiguousPrefix(TokenError):
    code = "ambiguous_prefix"


# --- knox, found lazily ------------------------------------------------------------------------------


def knox_installed() -> bool:
    """Whether knox is in INSTALLED_APPS (then it can also be imported, or Django would not start)."""
    return apps.is_installed("knox")


def require_knox() -> None:
    """Raise :class:`TokensUnavailable`, saying what to do, unless knox is installed and enabled."""
    if knox_installed():
        return
    try:
        import knox  # noqa: F401
    except ImportError:
        raise TokensUnavailable(
            'API tokens need django-rest-knox (the app\'s "tokens" extra, or pip install '
            '"django-rest-knox>=5"): install it, add "knox" to INSTALLED_APPS and run manage.py migrate.'
        ) from None
    raise TokensUnavailable('API tokens need "knox" in INSTALLED_APPS (then run manage.py migrate).')


def token_model() -> Any:
    """knox's token model (``AuthToken``, or the project's ``KNOX_TOKEN_MODEL``)."""
    require_knox()
    from knox.models import get_token_model

    return get_token_model()


def _knox_settings() -> Any:
    from knox.settings import knox_settings

    return knox_settings


def _key_length() -> int:
    from knox.settings import CONSTANTS

    return cast(int, CONSTANTS.TOKEN_KEY_LENGTH)  # knox is untyped


@contextmanager
def _database() -> Iterator[None]:
    """Database failures as one clear error (the usual cause: knox added but not migrated)."""
    try:
        yield
    except DatabaseError as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise TokenStoreError(
            f'The tokens\' database table cannot be used ({reason}). If "knox" was just added to '
            "INSTALLED_APPS, run manage.py migrate."
        ) from error


# --- what callers see ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenRecord:
    """One token as it may be shown: who it is for, its prefix and its dates, never the secret."""

    prefix: str
    user_id: Any
    username: str
    created: dt.datetime
    expiry: dt.datetime | None
    #: The token's scope rules (``push:orders.*``, ...), or None: all of its user's rights.
    scope: tuple[str, ...] | None = None

    def is_expired(self, now: dt.datetime | None = None) -> bool:
        """True once its expiry has passed (knox then refuses it, and deletes it on next sight)."""
        return self.expiry is not None and self.expiry <= (now or timezone.now())

    @classmethod
    def of(cls, row: Any, scope: Any = None) -> "TokenRecord":
        return cls(
            prefix=row.token_key,
            user_id=row.user_id,
            username=row.user.get_username(),
            created=row.created,
            expiry=row.expiry,
            scope=tuple(scope) if scope is not None else None,
        )


def _scopes(rows: list[Any]) -> dict[str, list[str]]:
    """The scope rules of these token rows, by digest (one query)."""
    from django_fdbqueue.models import TokenScope

    digests = [row.digest for row in rows]
    return dict(TokenScope.objects.filter(digest__in=digests).values_list("digest", "rules"))


def _check_scope(scope: Any) -> list[str] | None:
    """The scope's rules, checked and canonical, or :class:`InvalidScope` (before anything is stored)."""
    if scope is None:
        return None
    from django_fdbqueue.rights import canonical_rules

    try:
        return canonical_rules(scope)
    except ValueError as error:
        raise InvalidScope(str(error)) from None


def default_expiry() -> dt.timedelta | None:
    """The project's ``REST_KNOX["TOKEN_TTL"]``: a new token's lifetime unless one is given."""
    require_knox()
    return cast("dt.timedelta | None", _knox_settings().TOKEN_TTL)


def duration_text(duration: dt.timedelta | None) -> str:
    """A lifetime for people: "10 hours", "30 days", "1 day 6 hours", "never expires"."""
    if duration is None:
        return "never expires"
    seconds = int(duration.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    parts = [
        f"{count} {unit}{'' if count == 1 else 's'}"
        for count, unit in ((days, "day"), (hours, "hour"), (minutes, "minute"))
        if count
    ]
    return " ".join(parts[:2]) or f"{seconds} seconds"


def get_user(username: str) -> Any:
    """The user with that username (the model's USERNAME_FIELD), or :class:`UnknownUser`."""
    model = get_user_model()
    with _database():
        try:
            return model._default_manager.get_by_natural_key(username)
        except model.DoesNotExist:
            raise UnknownUser(f"No user is named {username!r}.") from None


# --- create, list, revoke ---------------------------------------------------------------------------


def _check_expiry(expiry: Any) -> dt.timedelta | None:
    if expiry is DEFAULT_EXPIRY:
        expiry = default_expiry()
    if expiry is None:
        return None
    if not isinstance(expiry, dt.timedelta) or expiry <= dt.timedelta(0):
        raise InvalidExpiry("A token's lifetime must be a positive length of time, or none for no expiry.")
    if expiry > MAX_EXPIRY:
        raise InvalidExpiry(f"A token may live at most {MAX_EXPIRY.days} days; use no expiry for longer.")
    return expiry


def _live(queryset: Any) -> Any:
    """The tokens knox would still accept: no expiry, or one still ahead."""
    from django.db.models import Q

    return queryset.filter(Q(expiry__isnull=True) | Q(expiry__gt=timezone.now()))


def create_token(
    user: Any, *, expiry: Any = DEFAULT_EXPIRY, created_by: Any = None, scope: Any = None
) -> tuple[TokenRecord, str]:
    """Create a token for ``user``; return what may be shown of it, and the token itself.

    The token is in the return value and nowhere else: show it once and forget it. ``expiry`` is
    a ``timedelta`` from now, ``None`` for a token that never expires, or by default the project's
    ``TOKEN_TTL``. ``created_by``, when given (the admin gives the logged-in user), must be a
    superuser to create a token for a superuser: a token acts with all of its user's rights, so
    a staff user allowed to create tokens must not gain a superuser's that way. ``scope``, a list
    of rules written ``action[,action]:pattern``, narrows the token below its user's rights; a
    malformed rule is :class:`InvalidScope` and nothing is stored.
    """
    model = token_model()
    lifetime = _check_expiry(expiry)
    rules = _check_scope(scope)
    if not user.is_active:
        raise UserNotAllowed(f"{user.get_username()!r} is inactive: knox refuses tokens of inactive users.")
    if created_by is not None and user.is_superuser and not created_by.is_superuser:
        raise UserNotAllowed("Only a superuser may create a token for a superuser.")
    limit = _knox_settings().TOKEN_LIMIT_PER_USER
    with _database(), transaction.atomic():
        if limit is not None and _live(model.objects.filter(user=user)).count() >= limit:
            raise TokenLimitReached(
                f"{user.get_username()!r} already has {limit} unexpired token{'' if limit == 1 else 's'}, "
                'the most REST_KNOX["TOKEN_LIMIT_PER_USER"] allows: revoke one first.'
            )
        row, token = model.objects.create(user=user, expiry=lifetime)
        if rules is not None:
            from django_fdbqueue.models import TokenScope

            TokenScope.objects.create(digest=row.digest, token_key=row.token_key, rules=rules)
    return TokenRecord.of(row, rules), token


def list_tokens(user: Any = None, *, limit: int | None = None) -> list[TokenRecord]:
    """Tokens, newest first: every user's, or ``user``'s only; expired ones too, marked by their date."""
    model = token_model()
    with _database():
        rows = model.objects.select_related("user").order_by("-created", "token_key")
        if user is not None:
            rows = rows.filter(user=user)
        if limit is not None:
            rows = rows[:limit]
        rows = list(rows)
        scopes = _scopes(rows)
        return [TokenRecord.of(row, scopes.get(row.digest)) for row in rows]


def _matching(prefix: str, user: Any) -> list[Any]:
    if not isinstance(prefix, str) or len(prefix.strip()) < MIN_PREFIX_LENGTH:
        raise InvalidPrefix(
            f"Give at least {MIN_PREFIX_LENGTH} characters of the token's prefix, as `token list` shows it."
        )
    key = prefix.strip()[: _key_length()]  # a whole token names its own prefix
    rows = token_model().objects.select_related("user").filter(token_key__startswith=key)
    if user is not None:
        rows = rows.filter(user=user)
    # Some databases match LIKE without regard to case; a prefix is compared exactly.
    return [row for row in rows if row.token_key.startswith(key)]


def _one(prefix: str, user: Any) -> Any:
    rows = _matching(prefix, user)
    if not rows:
        raise TokenNotFound(f"No token's prefix starts with {prefix.strip()[: _key_length()]!r}.")
    if len(rows) > 1:
        raise AmbiguousPrefix(
            f"{len(rows)} tokens have a prefix starting with {prefix.strip()!r}: give more characters."
        )
    return rows[0]


def find_token(prefix: str, *, user: Any = None) -> TokenRecord:
    """The one token whose prefix starts with ``prefix`` (of ``user``, if given), to show before revoking.

    No match is :class:`TokenNotFound`, several are :class:`AmbiguousPrefix`, fewer than
    :data:`MIN_PREFIX_LENGTH` characters :class:`InvalidPrefix`.
    """
    with _database():
        return TokenRecord.of(_one(prefix, user))


def revoke_token(prefix: str, *, user: Any = None) -> TokenRecord:
    """Delete the one token whose prefix starts with ``prefix`` (of ``user``, if given).

    The same rules as :func:`find_token`: revoking the wrong token on a guess is worse than
    asking for more characters.
    """
    with _database(), transaction.atomic():
        row = _one(prefix, user)
        record = TokenRecord.of(row)
        row.delete()
    return record


def revoke_all(user: Any) -> list[TokenRecord]:
    """Delete every token of ``user`` (expired ones too); return what they were, newest first."""
    model = token_model()
    with _database(), transaction.atomic():
        rows = list(model.objects.select_related("user").filter(user=user).order_by("-created", "token_key"))
        model.objects.filter(pk__in=[row.pk for row in rows]).delete()
    return [TokenRecord.of(row) for row in rows]
