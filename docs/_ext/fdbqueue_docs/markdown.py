"""Small helpers that write MyST Markdown safely from text found in the code."""

from __future__ import annotations

import re
from typing import Iterable

_SPECIAL = re.compile(r"([\\`*_\[\]<>|{}~#&$])")


def text(value: object) -> str:
    """Plain text with Markdown's special characters escaped, on one line."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(value).split()))


def code(value: object) -> str:
    """An inline code span that survives backticks and pipes (for tables) in the value."""
    value = " ".join(str(value).split())
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def cell(value: str) -> str:
    """A table cell: one line, pipes escaped (GFM reads ``\\|`` as a pipe, in code spans too)."""
    return re.sub(r"(?<!\\)\|", r"\\|", " ".join(value.split())) or " "


def table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> str:
    """A GFM table; cells are Markdown already (escape them with text() or code())."""
    headers = list(headers)
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(cell(value) for value in row) + " |")
    return "\n".join(lines) + "\n"


def fenced(body: str, language: str = "text") -> str:
    """A fenced code block, with a fence longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{body.rstrip()}\n{fence}\n"


def slug(value: str) -> str:
    """A label usable as a Sphinx target: lower case, runs of other characters as one dash."""
    return re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")


_CODE = re.compile(r"(?::[\w:]+:)?``(.+?)``|(?::[\w:]+:)?`([^`]+)`")


def prose(docstring: str | None, *, first_paragraph: bool = True) -> str:
    """Docstring text as escaped Markdown, its code spans (rST ``x``, `x`, :role:`x`) kept."""
    if not docstring:
        return ""
    import inspect

    body = inspect.cleandoc(docstring)
    if first_paragraph:
        body = body.split("\n\n", 1)[0]
    body = " ".join(body.split())
    out, last = [], 0
    for match in _CODE.finditer(body):
        out.append(_SPECIAL.sub(r"\\\1", body[last : match.start()]))
        out.append(code(match.group(1) or match.group(2)))
        last = match.end()
    out.append(_SPECIAL.sub(r"\\\1", body[last:]))
    return "".join(out)
