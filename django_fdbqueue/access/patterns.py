"""Queue-name patterns of grants and token scopes: an exact name, a prefix, or every queue.

Like Kafka's literal and prefixed resource patterns: ``orders`` is the queue ``orders`` only;
``orders.*`` is every queue whose name starts with ``orders.`` (not ``orders`` itself); ``*``
alone is every queue. ``*`` anywhere else is refused, so a pattern never means more than it says.

Names follow the service's queue-name rule (1 to 200 letters, digits, ``.``, ``_``, ``-``). The
rule is mirrored here, with ``*`` added, which a name may not hold (the names themselves are
checked by ``service.extension.check_name``); ``tests/test_access_rules.py`` checks that both agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["EVERY_QUEUE", "NAME_MAX_LENGTH", "Pattern", "PatternError", "parse_pattern"]

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
