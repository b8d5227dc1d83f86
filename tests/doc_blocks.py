"""Code blocks of the docs that a test runs end to end, read from the pages themselves (never a copy).

A page marks such a block with a comment line just above its fence, ``<!-- tutorial-test: NAME -->``
(the tutorial) or ``<!-- docs-test: NAME -->`` (a how-to guide whose block a test of its own runs,
beside the generic snippet runner). ``console`` blocks are transcripts: ``$ `` lines are
commands (a trailing backslash continues one), the lines after them their expected output, where
``...`` stands for any text within a line, or, alone on a line, for any number of lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_MARKED = r"<!-- {marker}: ([\w-]+) -->\n```(\w+)\n(.*?)\n```"


@dataclass(frozen=True)
class Block:
    name: str
    language: str
    body: str


@dataclass(frozen=True)
class Command:
    line: str  # the command, continuations joined
    expected: str  # the output the page shows for it ("" for none)


def marked_blocks(page: Path, marker: str = "docs-test") -> dict[str, Block]:
    """The page's blocks marked ``<!-- MARKER: NAME -->``, by name, in page order."""
    pattern = re.compile(_MARKED.format(marker=re.escape(marker)), re.S)
    blocks = {name: Block(name, language, body) for name, language, body in pattern.findall(page.read_text("utf-8"))}
    assert blocks, f"no <!-- {marker}: NAME --> block in {page}"
    return blocks


def commands(block: Block) -> list[Command]:
    """The commands of a ``console`` block, each with the output shown after it."""
    assert block.language == "console", f"block {block.name!r} is {block.language}, not console"
    found: list[Command] = []
    lines = block.body.splitlines()
    index = 0
    while index < len(lines):
        assert lines[index].startswith("$ "), f"block {block.name!r}: output before any command: {lines[index]!r}"
        command = lines[index][2:]
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1
            command = command[:-1] + " " + lines[index].strip()
        index += 1
        output: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        found.append(Command(command, "\n".join(output)))
    return found


def _normal(text: str) -> list[str]:
    """Lines with runs of blanks squeezed to one and no blanks at their ends; no blank lines
    at the start or end. (A table's column widths follow its longest cell, which ``...`` hides.)"""
    lines = [re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is what the page shows as ``expected``, ``...`` matching anything."""
    pattern = ""
    for line in _normal(expected):
        if line == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += r"[^\n]*?".join(re.escape(part) for part in line.split("...")) + r"\n"
    lines = _normal(actual)
    return re.fullmatch(pattern, "".join(line + "\n" for line in lines)) is not None


def assert_output(command: str, expected: str, actual: str) -> None:
    assert output_matches(expected, actual), (
        f"$ {command}\nprinted:\n{actual}\nbut the page shows:\n{expected}"
    )
