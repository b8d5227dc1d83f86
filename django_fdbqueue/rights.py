"""How rights are written: the five actions, queue-name patterns and token scope rules.

Checked and put in canonical form here, in plain Python with no Django and no store, so that the
models (``QueueGrant``, ``TokenScope``) validate what they store with it while ``access``, which
reads those models to answer who may do what, reasons with the same words: the imports point one
way, ``access`` -> ``models`` -> here. Queue names follow the service's rule, mirrored here rather
than imported (``tests/test_access_rules.py`` checks that both agree).

What actions, patterns and scopes mean: the permissions guide (docs/howto/permissions.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Iterable

__all__ = [
    "ACTIONS",
    "EVERY_QUEUE",
    "NAME_MAX_LENGTH",
    "Action",
    "Pattern",
    "PatternError",
    "ScopeRule",
    "canonical_rules",
    "check_action",
    "join_actions",
    "parse_actions",
    "parse_pattern",
    "parse_scope",
]

# ----------------------------------------------------------------------------- actions


class Action(str, Enum):
    """What a grant allows on the queues its pattern matches."""

    VIEW = "view"  # list, stats, peek, browse, scheduled items, dead letters read, key limits read
    PUSH = "push"
    CONSUME = "consume"  # pop, claim, ack, release, extend
    MANAGE = "manage"  # create, settings, clear, dead letters requeue/delete, key limits, schedules
    DELETE = "delete"

    def __str__(self) -> str:
        return self.value


#: The actions' names, in their canonical order.
ACTIONS: tuple[str, ...] = tuple(action.value for action in Action)


def check_action(action: object) -> str:
    """``action`` as one of :data:`ACTIONS`, or ValueError naming the ones there are."""
    value = action.value if isinstance(action, Action) else action
    if not isinstance(value, str) or value not in ACTIONS:
        raise ValueError(f"Unknown action {action!r}: the actions are {', '.join(ACTIONS)}.")
    return value


def parse_actions(text: str | Iterable[str]) -> tuple[str, ...]:
    """Actions written ``"push,consume"`` (or given as a list): checked, deduplicated, in canonical order."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    names = [part.strip() if isinstance(part, str) else part for part in parts]
    if all(name == "" for name in names):
        raise ValueError(f"Name at least one action: {', '.join(ACTIONS)}.")
    if "" in names:
        raise ValueError(f"An empty action in {text!r}: separate the actions ({', '.join(ACTIONS)}) by single commas.")
    chosen = {check_action(name) for name in names}
    return tuple(action for action in ACTIONS if action in chosen)


def join_actions(actions: Iterable[str]) -> str:
    """The stored form of a set of actions: canonical order, comma-separated."""
    return ",".join(parse_actions(list(actions)))


# ----------------------------------------------------------------------------- patterns

NAME_MAX_LENGTH = 200
_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,%d}" % NAME_MAX_LENGTH)
#: The pattern that matches every queue.
EVERY_QUEUE = "*"
_SUFFIX = ".*"
_RULE = (
    "a pattern is a queue name (1 to 200 letters, digits, '.', '_' or '-'), a prefix written "
    "'orders.*', or '*' alone for every queue"
)


class PatternError(ValueError):
    """A pattern that means nothing, with a message saying how to write one."""


@dataclass(frozen=True)
class Pattern:
    """A parsed pattern: ``kind`` is ``"literal"``, ``"prefixed"`` or ``"all"``."""

    text: str
    kind: str
    stem: str  # the name (literal), the prefix with its dot (prefixed), or "" (all)

    def matches(self, queue: str) -> bool:
        """Whether the queue named ``queue`` is one this pattern names."""
        if self.kind == "literal":
            return queue == self.stem
        return queue.startswith(self.stem)

    def __str__(self) -> str:
        return self.text


def parse_pattern(text: object) -> Pattern:
    """The pattern ``text`` means, or :class:`PatternError` saying what is wrong with it."""
    if not isinstance(text, str):
        raise PatternError(f"A pattern must be text, not {type(text).__name__}: {_RULE}.")
    if not text:
        raise PatternError(f"The pattern is empty: {_RULE}.")
    if text == EVERY_QUEUE:
        return Pattern(text, "all", "")
    if text.endswith(_SUFFIX) and "*" not in text[: -len(_SUFFIX)]:
        prefix = text[: -len(_SUFFIX)]
        if prefix and _NAME_RE.fullmatch(prefix) and len(prefix) <= NAME_MAX_LENGTH - 2:
            return Pattern(text, "prefixed", prefix + ".")
        raise PatternError(f"{_shown(text)} is not a valid prefix pattern: {_RULE}.")
    if "*" in text:
        raise PatternError(f"{_shown(text)}: '*' may only stand alone or end a prefix as '.*'; {_RULE}.")
    if not _NAME_RE.fullmatch(text):
        raise PatternError(f"{_shown(text)} has characters a queue name cannot have, or is too long: {_RULE}.")
    return Pattern(text, "literal", text)


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


# ----------------------------------------------------------------------------- scope rules

_FORM = "write a scope as action[,action]:pattern, e.g. push:orders.* or consume,view:jobs"


@dataclass(frozen=True)
class ScopeRule:
    """One rule of a scope: these actions on the queues the pattern matches."""

    actions: tuple[str, ...]
    pattern: Pattern

    def allows(self, action: str, queue: str) -> bool:
        return action in self.actions and self.pattern.matches(queue)

    def __str__(self) -> str:
        return f"{','.join(self.actions)}:{self.pattern}"


def parse_scope(text: object) -> ScopeRule:
    """The rule ``text`` writes, or ValueError saying what is wrong and how to write one."""
    if not isinstance(text, str) or ":" not in text:
        raise ValueError(f"Malformed scope {text!r}: {_FORM}.")
    actions, _, pattern = text.partition(":")
    try:
        return ScopeRule(parse_actions(actions), parse_pattern(pattern))
    except ValueError as error:
        raise ValueError(f"Malformed scope {text!r}: {error}") from None


def canonical_rules(rules: Iterable[object]) -> list[str]:
    """Every rule checked and written canonically; ValueError for the first bad one, or for none."""
    if isinstance(rules, str) or not isinstance(rules, Iterable):
        raise ValueError(f"A scope is a list of rules; {_FORM}.")
    parsed = [str(parse_scope(rule)) for rule in rules]
    if not parsed:
        raise ValueError(f"A scope needs at least one rule; {_FORM}.")
    return list(dict.fromkeys(parsed))
