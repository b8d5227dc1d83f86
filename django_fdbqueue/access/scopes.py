"""Token scopes: rules written ``action[,action]:pattern`` that narrow what one API token may do.

``push:orders.*`` lets a token push to the queues under ``orders.``; ``consume,view:jobs`` lets it
consume from and look at ``jobs``. A scope only ever narrows: a token may do what its scope allows
*and* its user may do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .actions import parse_actions
from .patterns import Pattern, parse_pattern

__all__ = ["ScopeRule", "canonical_rules", "parse_scope"]

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
