"""A page's fenced code blocks, sorted into run, not run and refused, through Sybil's lexer.

Sybil reads the page (``Document``) and its Markdown fence lexer finds every fenced block,
nested ones included; each block the runner acts on becomes a Sybil ``Region`` whose evaluator
runs it. MyST's ``{code-block} python`` directive counts as ``python``; other ``{directive}``
fences (notes, toctrees) are containers whose inner blocks are looked at like any other.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from sybil import Document, Region, Sybil
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

RUN = ("python", "console")
#: Blocks that are not run, each for a reason the language says (commands that cannot run in a
#: test, configuration files, output, data).
NOT_RUN = frozenset(
    {
        "bash",
        "ini",
        "text",
        "json",
        "toml",
        "yaml",
        "nginx",
        "html",
        "xml",
        "css",
        "javascript",
        "diff",
        "sql",
        "promql",
        "dockerfile",
        "caddy",
        "markdown",
        "md",
        "rst",
        "none",
        "pycon",
    }
)
CODE_DIRECTIVES = ("{code-block}", "{code}", "{sourcecode}")
INFO = re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE)
DIRECTIVE_OPTION = re.compile(r"[ \t]*:[\w-]+:[^\n]*\n")
#: A page opts out with front matter ``snippets: skip`` or a ``<!-- snippets: skip ... -->`` comment.
OPT_OUT = re.compile(r"\A---\n(?:(?!---\n).*\n)*?snippets:\s*skip\b|^<!--\s*snippets:\s*skip\b", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, its text, and where it is on the page."""

    language: str
    source: str
    path: Path
    fence_line: int  # the line of the opening fence (1-based)
    first_line: int  # the line of the block's first line of text (1-based)

    @property
    def location(self) -> str:
        return self.at(self.fence_line)

    def at(self, line: int) -> str:
        """``page, line N``, the page relative to the working directory when it is below it."""
        relative = os.path.relpath(self.path)
        return f"{self.path if relative.startswith('..') else relative}, line {line}"


def language_of(info: str) -> tuple[str, bool]:
    """The block's language and whether it is a directive (``{code-block} python`` -> python)."""
    words = info.split()
    if not words:
        return "", False
    if words[0] in CODE_DIRECTIVES:
        return (words[1] if len(words) > 1 else ""), True
    return words[0], False


def opted_out(text: str) -> bool:
    return bool(OPT_OUT.search(text))


class BlockParser:
    """A Sybil parser: a Region per block to run, and one per block the rules refuse."""

    def __init__(self, evaluator: Callable) -> None:
        self.lexer = RawFencedCodeBlockLexer(info_pattern=INFO)
        self.evaluator = evaluator

    def __call__(self, document: Document) -> Iterable[Region]:
        regions = []
        for region in self.lexer(document):
            info = region.lexemes["info"].strip()
            if info.startswith("{") and info.split()[0] not in CODE_DIRECTIVES:
                continue  # a container directive: its inner blocks are lexed on their own
            language, directive = language_of(info)
            source = region.lexemes["source"]
            skipped = 0
            if directive:  # a directive's :option: lines come before its text
                while match := DIRECTIVE_OPTION.match(source, skipped):
                    skipped = match.end()
            fence_line = document.text.count("\n", 0, region.start) + 1
            block = Block(
                language if language in RUN else ("" if language in NOT_RUN else "refused:" + language),
                str(source)[skipped:],
                Path(document.path),
                fence_line,
                fence_line + 1 + source.count("\n", 0, skipped),
            )
            regions.append(Region(region.start, region.end, parsed=block, evaluator=self.evaluator))
        return _outermost_first(regions)


def _outermost_first(regions: list[Region]) -> list[Region]:
    """The blocks to act on, in page order: not those nested in another block (a page that shows
    Markdown with fences in it), nor the blocks that are not run."""

    def nested(region: Region) -> bool:
        return any(o is not region and o.start <= region.start and region.end <= o.end for o in regions)

    return [r for r in regions if r.parsed.language and not nested(r)]


def parse(path: Path, evaluator: Callable) -> Document:
    """The page as a Sybil document whose examples are its blocks to act on, in page order."""
    return Sybil(parsers=[BlockParser(evaluator)]).parse(Path(path))
