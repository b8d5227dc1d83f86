"""```console blocks: ``$ `` lines are commands, the lines after one its expected output.

A command ending in ``\\`` continues on the next line. Output is compared over the whole output:
``...`` within a line matches any text (across lines too), and ``...`` alone on a line any number
of lines, none included; runs of blanks count as one (a table's column widths follow its longest
cell, which ``...`` may hide), and blanks at line ends and blank lines at either end do not count.
A command that fails (non-zero exit) fails the block unless the expected output shows its error.
The tutorial's end-to-end test (``tests/doc_blocks.py``) reads transcripts with the same rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import shell
from .blocks import Block
from .errors import SnippetFailure

PROMPT = "$ "


@dataclass
class Command:
    text: str
    line: int  # the page line of its ``$ ``
    expected: str


def split_transcript(lines: list[str]) -> list[tuple[int, str, str]]:
    """``(index of its $ line, command, expected output)`` for each command of a transcript.

    Raises ValueError at output shown before any command.
    """
    found: list[tuple[int, str, str]] = []
    index = 0
    while index < len(lines):
        line, start = lines[index], index
        index += 1
        if line.startswith(PROMPT) or line == PROMPT.strip():
            text = line[len(PROMPT) :]
            while text.endswith("\\") and index < len(lines):
                text = text[:-1] + " " + lines[index].removeprefix("> ").strip()
                index += 1
            found.append((start, text.strip(), ""))
        elif found:
            position, text, expected = found[-1]
            found[-1] = (position, text, expected + line + "\n")
        elif line.strip():
            raise ValueError(start)
    return found


def transcript(block: Block) -> list[Command]:
    """The block's commands with their expected output."""
    try:
        commands = [
            Command(text, block.first_line + index, expected)
            for index, text, expected in split_transcript(block.source.split("\n"))
        ]
    except ValueError as error:
        raise SnippetFailure(
            block.at(block.first_line + error.args[0]),
            (
                "a ```console block starts with a command: put `$ ` before each command, or use "
                "```text for output shown on its own."
            ),
        ) from None
    if not commands:
        raise SnippetFailure(block.location, "a ```console block with no `$ ` command: use ```text for output.")
    return commands


def normalise(text: str) -> str:
    """Blanks at line ends and blank lines at either end removed; ends with one newline."""
    lines = [line.rstrip() for line in text.split("\n")]
    return "\n".join(lines).strip("\n") + "\n"


def _squeezed(text: str) -> str:
    return "".join(re.sub(r"[ \t]+", " ", line).strip() + "\n" for line in normalise(text).splitlines())


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is the output the page shows as ``expected`` (the rules above)."""
    pattern = ""
    for line in _squeezed(expected).splitlines():
        if line == "...":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += ".*?".join(re.escape(part) for part in line.split("...")) + r"\n"
    return re.fullmatch(pattern, _squeezed(actual), re.S) is not None


def shows_text(expected: str) -> bool:
    """Whether the expected output shows something (an error), not only ``...``."""
    return bool(normalise(expected).replace("...", "").strip())


def run_block(page: Any, block: Block) -> None:
    __tracebackhide__ = True
    for command in transcript(block):
        location = block.at(command.line)
        code, output = shell.run(page, command.text, location)
        if not matches(command.expected, output):
            raise SnippetFailure(
                location,
                f"`$ {command.text}` printed other output (exit status {code}).\n"
                + comparison(command.expected, output),
            )
        if code != 0 and not shows_text(command.expected):
            raise SnippetFailure(
                location,
                f"`$ {command.text}` failed with exit status {code} and the page "
                "shows no error for it:\n" + comparison(command.expected, output),
            )


def comparison(expected: str, actual: str) -> str:
    def indent(text: str) -> str:
        text = normalise(text).rstrip("\n")
        return "\n".join("    " + line for line in text.split("\n")) if text else "    (nothing)"

    return f"Expected:\n{indent(expected)}\nGot:\n{indent(actual)}"
