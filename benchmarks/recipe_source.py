"""Reading FoundationDB's priority-queue recipe from a file the user names (``--recipe PATH``).

The project ships none of the recipe: the bench runs whatever Python the user points it to, as
it is. FoundationDB publishes the recipe as documentation, so the file may be prose with the code
in a literal block (reStructuredText ``::`` blocks or Markdown fences) or a plain Python file.
:func:`load_recipe` finds the one piece of code that defines the recipe's functions and checks
their shape, so a wrong file is refused before minutes of measuring, with a message that says
what was looked for.

The recipe's functions take the database or a transaction first, like the service's:
``push(tr, value, priority)``, ``pop(tr, max=False)`` and ``peek(tr, max=False)``.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import textwrap
from dataclasses import dataclass

from django_fdbqueue.bench.references import RecipeUnavailable

__all__ = ["RecipeUnavailable", "RecipeSource", "load_recipe", "extract_code", "REQUIRED"]

#: The recipe's functions the bench calls, and the positional parameters each must accept.
REQUIRED = {"push": 3, "pop": 1, "peek": 1}
#: A documentation page is a few kilobytes: anything far larger is not the recipe.
MAX_BYTES = 1_000_000

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)\s*$")


@dataclass(frozen=True)
class RecipeSource:
    """The recipe's code as found in the file, with where it came from (for the report)."""

    path: str
    code: str
    sha256: str

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(REQUIRED)


def _literal_blocks(text: str) -> list[str]:
    """reStructuredText literal blocks: the indented lines after a paragraph ending in ``::``."""
    lines = text.splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        if not lines[index].rstrip().endswith("::"):
            index += 1
            continue
        index += 1
        while index < len(lines) and not lines[index].strip():
            index += 1
        body = []
        while index < len(lines) and (not lines[index].strip() or lines[index][:1] in (" ", "\t")):
            body.append(lines[index])
            index += 1
        if body:
            blocks.append(textwrap.dedent("\n".join(line.rstrip() for line in body)).strip("\n") + "\n")
    return blocks


def _fenced_blocks(text: str) -> list[str]:
    """Markdown fenced blocks marked python (or unmarked)."""
    blocks = []
    fence = language = None
    body: list[str] = []
    for line in text.splitlines():
        match = _FENCE.match(line.strip())
        if fence is None:
            if match:
                fence, language, body = match.group(1), match.group(2).lower(), []
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and not match.group(2):
            if language in ("", "python", "py", "python3"):
                blocks.append(textwrap.dedent("\n".join(body)).strip("\n") + "\n")
            fence = None
        else:
            body.append(line)
    return blocks


def _problems(code: str) -> list[str] | None:
    """What ``code`` lacks to be the recipe; None when it does not even parse as Python."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    found = {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in REQUIRED
    }
    problems = []
    for name, positional in REQUIRED.items():
        node = found.get(name)
        if node is None:
            problems.append(f"no function {name}()")
        elif isinstance(node, ast.AsyncFunctionDef):
            problems.append(f"{name}() is a coroutine")
        elif node.args.vararg is None and len(node.args.posonlyargs) + len(node.args.args) < positional:
            problems.append(f"{name}() takes fewer than {positional} positional arguments")
    return problems


def extract_code(text: str) -> str:
    """The recipe's code in ``text``: the whole text if it is the recipe, else its code block.

    Of several blocks that define the recipe's functions, the last is taken (documentation shows
    fragments first and the complete code at the end). Raises RecipeUnavailable otherwise.
    """
    if _problems(text) == []:
        return text
    seen: list[str] = []
    for block in reversed(_literal_blocks(text) + _fenced_blocks(text)):
        problems = _problems(block)
        if problems == []:
            return block
        if problems:
            seen.extend(problems)
    wanted = ", ".join(f"{name}()" for name in REQUIRED)
    detail = f" (the closest code block has {'; '.join(sorted(set(seen)))})" if seen else ""
    raise RecipeUnavailable(
        f"found no Python code defining {wanted} of FoundationDB's priority-queue recipe{detail}. "
        "Give a Python file, or the recipe's documentation page with the code in a literal block."
    )


def load_recipe(path: str) -> RecipeSource:
    """Read and check the recipe file; RecipeUnavailable says what is wrong with it."""
    shown = os.fspath(path)
    try:
        size = os.path.getsize(shown)
        if size > MAX_BYTES:
            raise RecipeUnavailable(f"--recipe {shown}: {size:,} bytes is too large for a recipe page.")
        with open(shown, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise RecipeUnavailable(f"--recipe {shown}: no such file.") from None
    except IsADirectoryError:
        raise RecipeUnavailable(f"--recipe {shown} is a directory; give the recipe's file.") from None
    except UnicodeDecodeError:
        raise RecipeUnavailable(f"--recipe {shown}: not UTF-8 text.") from None
    except OSError as error:
        raise RecipeUnavailable(f"--recipe {shown}: {error.strerror or error}.") from None
    try:
        code = extract_code(text)
    except RecipeUnavailable as error:
        raise RecipeUnavailable(f"--recipe {shown}: {error}") from None
    return RecipeSource(os.path.abspath(shown), code, hashlib.sha256(text.encode("utf-8")).hexdigest())
