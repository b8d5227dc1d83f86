"""Who may do what to which queue: ``can``, ``require``, ``visible_queues`` and ``may_see``.

A user's rights on a queue are the union of: everything, for a superuser; the action on every
queue, for each Django permission of :data:`~.actions.PERMISSIONS` the user holds (directly, through
a group, or through any authentication backend); the actions of each :class:`QueueGrant` to the
user or to one of the user's groups whose pattern matches the queue. Inactive and anonymous users
have none. A token's scope, when it has one, narrows that further: never widens it.

``FDBQUEUE["ACCESS"] = "authenticated"`` gives every active, authenticated user every action (the
behaviour before grants existed); token scopes still narrow.

Cost: a user's grants and Django permissions, and a token's scope, are loaded once and kept in
this process for at most :data:`CACHE_SECONDS`. Saving or deleting a grant, a scope, a group or a
permission assignment (signals, see ``access.signals``) drops this process's cache at once; other
processes see the change within :data:`CACHE_SECONDS`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar, cast

from django_fdbqueue.conf import get_settings
from django_fdbqueue.rights import ACTIONS, EVERY_QUEUE, Pattern, ScopeRule, check_action, parse_pattern, parse_scope

from . import events
from .actions import PERMISSIONS
from .exceptions import QueueAccessDenied

__all__ = ["CACHE_SECONDS", "can", "can_every", "forget", "may_see", "require", "require_every", "visible_queues"]

logger = logging.getLogger("django_fdbqueue.access")

#: Longest a change made in another process takes to apply here (RabbitMQ's permission cache
#: keeps 15 s by default).
CACHE_SECONDS = 5.0
_MAX_ENTRIES = 10_000
T = TypeVar("T")


@dataclass(frozen=True)
class _Rights:
    """What grants and permissions give one user (a superuser's are not cached: read from the user)."""

    everywhere: frozenset[str]
    rules: tuple[tuple[frozenset[str], Pattern], ...]

    def allows(self, action: str, queue: str) -> bool:
        if action in self.everywhere:
            return True
        return any(action in actions and pattern.matches(queue) for actions, pattern in self.rules)

    def allows_everywhere(self, action: str) -> bool:
        return action in self.everywhere or any(
            action in actions and pattern.kind == "all" for actions, pattern in self.rules
        )


_ALL = _Rights(frozenset(ACTIONS), ())


class _Cache:
    """Values by key, dropped by :meth:`forget` (a version bump) or after CACHE_SECONDS."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._entries: dict[Any, tuple[int, float, Any]] = {}

    def get(self, key: Any, load: Callable[[], T]) -> T:
        now = time.monotonic()
        entry = self._entries.get(key)
        if entry is not None and entry[0] == self._version and entry[1] > now:
            return cast(T, entry[2])  # stored by a load of this key, so of its type
        version = self._version
        value = load()
        with self._lock:
            if len(self._entries) >= _MAX_ENTRIES:
                self._entries.clear()
            if version == self._version:  # not stored when a change happened while loading
                self._entries[key] = (version, now + CACHE_SECONDS, value)
        return value

    def forget(self) -> None:
        with self._lock:
            self._version += 1
            self._entries.clear()


_cache = _Cache()


def forget(**_: Any) -> None:
    """Drop every cached grant, permission and scope of this process (connected to the signals)."""
    _cache.forget()


def _load_rights(user: Any) -> _Rights:
    from django.db.models import Q

    from django_fdbqueue.models import QueueGrant

    everywhere = frozenset(action for action, perm in PERMISSIONS.items() if user.has_perm(perm))
    rows = QueueGrant.objects.filter(Q(user=user) | Q(group__user=user)).values_list("actions", "pattern")
    rules = []
    for actions, pattern in rows:
        try:
            rules.append((frozenset(check_action(a) for a in actions.split(",")), parse_pattern(pattern)))
        except ValueError:
            logger.warning("Ignoring a queue grant stored without validation: %r on %r", actions, pattern)
    return _Rights(everywhere, tuple(rules))


def rights_of(user: Any) -> _Rights | None:
    """The user's rights, or None for a user who has none (anonymous, inactive)."""
    if user is None or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return None
    if getattr(user, "is_superuser", False) or get_settings().access == "authenticated":
        return _ALL
    # date_joined too: a primary key some databases reuse after a delete never inherits rights.
    key = ("user", user.pk, getattr(user, "date_joined", None))
    return _cache.get(key, lambda: _load_rights(user))


def _load_scope(digest: str) -> tuple[ScopeRule, ...] | None:
    from django_fdbqueue.models import TokenScope

    rules = TokenScope.objects.filter(digest=digest).values_list("rules", flat=True).first()
    if rules is None:
        return None
    parsed = []
    for text in rules:
        try:
            parsed.append(parse_scope(text))
        except ValueError:
            logger.warning("Ignoring a token scope rule stored without validation: %r", text)
    return tuple(parsed)


def _scope(token: Any) -> tuple[ScopeRule, ...] | None:
    """The token's scope rules, or None when it has no scope (a knox token is known by its digest)."""
    digest = getattr(token, "digest", None)
    if not isinstance(digest, str):
        return None
    return _cache.get(("token", digest), lambda: _load_scope(digest))


def _scope_allows(token: Any, action: str, queue: str) -> bool:
    scope = _scope(token) if token is not None else None
    return scope is None or any(rule.allows(action, queue) for rule in scope)


def can(user: Any, action: str, queue: str, *, token: Any = None) -> bool:
    """Whether ``user`` (acting through ``token``, if given) may do ``action`` on the queue ``queue``.

    Superusers may do everything; inactive and anonymous users nothing. ``action`` must be one of
    ``ACTIONS`` (ValueError otherwise).
    """
    action = check_action(action)
    rights = rights_of(user)
    return rights is not None and rights.allows(action, queue) and _scope_allows(token, action, queue)


def can_every(user: Any, action: str, *, token: Any = None) -> bool:
    """Whether ``user`` may do ``action`` on every queue: a Django permission, or a grant on ``*``."""
    action = check_action(action)
    rights = rights_of(user)
    if rights is None or not rights.allows_everywhere(action):
        return False
    scope = _scope(token) if token is not None else None
    return scope is None or any(action in r.actions and r.pattern.kind == "all" for r in scope)


def may_see(user: Any, queue: str, *, token: Any = None) -> bool:
    """Whether any action is granted on the queue: then a refusal is a 403, else the queue "does not exist"."""
    return any(can(user, action, queue, token=token) for action in ACTIONS)


def require(user: Any, action: str, queue: str, *, token: Any = None) -> None:
    """Return when :func:`can`; else raise :class:`QueueAccessDenied` (and count the refusal)."""
    if can(user, action, queue, token=token):
        return
    events.emit(events.REFUSED, action)
    raise QueueAccessDenied(action, queue, visible=may_see(user, queue, token=token))


def require_every(user: Any, action: str, *, token: Any = None) -> None:
    """Return when :func:`can_every`; else raise :class:`QueueAccessDenied` for every queue (a 403)."""
    if can_every(user, action, token=token):
        return
    events.emit(events.REFUSED, action)
    raise QueueAccessDenied(action, EVERY_QUEUE, visible=True)


def visible_queues(user: Any, names: Iterable[str], *, token: Any = None) -> list[str]:
    """Those of ``names`` the user may ``view``, in their order."""
    return [name for name in names if can(user, "view", name, token=token)]
