"""```console blocks: ``$ `` lines are commands, the lines after one its expected output.

A command ending in ``\\`` continues on the next line. Output is compared as doctest compares
with ELLIPSIS, over the whole output: ``...`` matches any text, within a line or across lines;
trailing whitespace and trailing blank lines do not count. A command that fails (non-zero exit)
fails the block unless the expected output shows its error.
"""

from __future__ import annotations

import doctest
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


def transcript(block: Block) -> list[Command]:
    """The block's commands with their expected output."""
    commands: list[Command] = []
    lines = block.source.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        number = block.first_line + index
        index += 1
        if line.startswith(PROMPT) or line == PROMPT.strip():
            text = line[len(PROMPT):]
            while text.endswith("\\") and index < len(lines):
                text = text[:-1] + " " + lines[index].removeprefix("> ")
                index += 1
            commands.append(Command(text.strip(), number, ""))
        elif commands:
            commands[-1].expected += line + "\n"
        elif line.strip():
            raise SnippetFailure(block.at(number), (
                "a ```console block starts with a command: put `$ ` before each command, or use "
                "```text for output shown on its own."))
    if not commands:
        raise SnippetFailure(block.location, "a ```console block with no `$ ` command: use ```text for output.")
    return commands


def normalise(text: str) -> str:
    lines = [line.rstrip() for line in text.split("\n")]
    return "\n".join(lines).strip("\n") + "\n"


def matches(expected: str, actual: str) -> bool:
    """doctest's ELLIPSIS comparison of whole outputs, trailing whitespace ignored."""
    want, got = normalise(expected), normalise(actual)
    return doctest.OutputChecker().check_output(want, got, doctest.ELLIPSIS)


def shows_text(expected: str) -> bool:
    """Whether the expected output shows something (an error), not only ``...``."""
    return bool(normalise(expected).replace("...", "").strip())


def run_block(page: Any, block: Block) -> None:
    __tracebackhide__ = True
    for command in transcript(block):
        location = block.at(command.line)
        code, output = shell.run(page, command.text, location)
        if not matches(command.expected, output):
            raise SnippetFailure(location, f"`$ {command.text}` printed other output (exit status {code}).\n"
                                 + comparison(command.expected, output))
        if code != 0 and not shows_text(command.expected):
            raise SnippetFailure(location, f"`$ {command.text}` failed with exit status {code} and the page "
                                 "shows no error for it:\n" + comparison(command.expected, output))


def comparison(expected: str, actual: str) -> str:
    def indent(text: str) -> str:
        text = normalise(text).rstrip("\n")
        return "\n".join("    " + line for line in text.split("\n")) if text else "    (nothing)"

    return f"Expected:\n{indent(expected)}\nGot:\n{indent(actual)}"
