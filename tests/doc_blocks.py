"""Code blocks of the docs that a test runs end to end, read from the pages themselves (never a copy).

A page marks such a block with a comment line just above its fence, ``<!-- tutorial-test: NAME -->``
(the tutorial) or ``<!-- docs-test: NAME -->`` (a how-to guide whose block a test of its own runs,
beside the generic snippet runner). ``console`` blocks are transcripts, read and compared by the
snippet runner's rules (``tests/docsnippets/console.py``): ``$ `` lines are commands, the lines
after them their expected output, where ``...`` stands for any text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.docsnippets import console

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
    try:
        found = console.split_transcript(block.body.splitlines())
    except ValueError as error:
        raise AssertionError(f"block {block.name!r}: output before any command, line {error.args[0] + 1}") from None
    return [Command(text, expected.rstrip("\n")) for _index, text, expected in found]


def output_matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is what the page shows as ``expected``, ``...`` matching anything."""
    return console.matches(expected, actual)


def assert_output(command: str, expected: str, actual: str) -> None:
    assert output_matches(expected, actual), f"$ {command}\nprinted:\n{actual}\nbut the page shows:\n{expected}"
