"""reference/checks.md: every system check id the app can report, found in its source.

Any call that builds a check message with a literal id (``Error(..., id="fdbqueue.E005")``,
``Problem("fdbqueue.E001", msg, hint)``) anywhere in the package is listed, with each message
and hint it can carry, so a new check appears here without anyone editing the page.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass, field

from . import markdown as md
from .source import enclosing_function, local_strings, package_modules, parents, template

ID = re.compile(r"^[a-z_]+\.[CEWI]\d{3}$")
LEVELS = {"C": "Critical", "E": "Error", "W": "Warning", "I": "Info"}


@dataclass
class Check:
    id: str
    summary: str = ""
    variants: list[tuple[str, str, str]] = field(default_factory=list)  # (message, hint, module)
    details: list[str] = field(default_factory=list)  # what a {message} placeholder can say

    @property
    def level(self) -> str:
        return LEVELS[self.id.split(".")[1][0]]


def _call_parts(call: ast.Call) -> tuple[str, ast.AST | None, ast.AST | None] | None:
    """(id, message node, hint node) of a call that builds a check message, else None."""
    keywords = {k.arg: k.value for k in call.keywords}
    ident = keywords.get("id")
    args = list(call.args)
    if ident is None and len(args) == 3:  # Problem(id, msg, hint)
        ident, message, hint = args
    else:
        message = args[0] if args else keywords.get("msg")
        hint = keywords.get("hint")
    if isinstance(ident, ast.Constant) and isinstance(ident.value, str) and ID.match(ident.value):
        return ident.value, message, hint
    return None


def _summaries() -> dict[str, str]:
    """One-line descriptions from the id list in ``checks``' module docstring."""
    doc = importlib.import_module("django_fdbqueue.checks").__doc__ or ""
    found: dict[str, str] = {}
    for match in re.finditer(r"^- (\S+)\s+(.+(?:\n(?!- )\s+.+)*)", doc, re.MULTILINE):
        found[match.group(1)] = " ".join(match.group(2).split())
    return found


def collect() -> dict[str, Check]:
    """Every check id in the package, in id order, with its messages and hints."""
    checks: dict[str, Check] = {}
    summaries = _summaries()
    for module in package_modules():
        calls = [node for node in ast.walk(module.tree) if isinstance(node, ast.Call)]
        found = [(node, parts) for node in calls if (parts := _call_parts(node))]
        if not found:
            continue
        namespace, parent = module.namespace(), parents(module.tree)
        for node, (ident, message, hint) in sorted(found, key=lambda pair: pair[0].lineno):
            local = local_strings(enclosing_function(node, parent))
            check = checks.setdefault(ident, Check(ident, summaries.get(ident, "")))
            if message is not None and "{message}" in template(message, {}, {}):
                check.details.extend(_collected_errors(module.tree, namespace))
            check.variants.append(
                (
                    template(message, namespace, local) if message is not None else "",
                    template(hint, namespace, local) if hint is not None else "",
                    module.name,
                )
            )
    return dict(sorted(checks.items(), key=lambda pair: _order(pair[0])))


def _order(ident: str) -> tuple[bool, str, str, str]:
    """fdbqueue.* first, then by number, an error before the warning of the same number."""
    prefix, code = ident.split(".")
    return prefix != "fdbqueue", prefix, code[1:], code[0]


def _collected_errors(tree: ast.AST, namespace: dict) -> list[str]:
    """Texts a module collects into a list of errors (``self.option_errors.append(...)``), which a
    check then reports one message each."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and ast.unparse(node.func.value).endswith("errors")
            and len(node.args) == 1
        ):
            text = template(node.args[0], namespace, {})
            if text and not text.startswith("{"):
                found.append(text)
    return found


def label(ident: str) -> str:
    return "check-" + md.slug(ident)


def render() -> str:
    checks = collect()
    out = [
        md.table(
            ["Id", "Level", "Reported when"],
            [
                [f"{{ref}}`{ident} <{label(ident)}>`", check.level, md.text(check.summary or check.variants[0][0])]
                for ident, check in checks.items()
            ],
        )
    ]
    for ident, check in checks.items():
        out.append(f"({label(ident)})=\n## {md.code(ident)}\n")
        if check.summary:
            out.append(md.text(check.summary) + "\n")
        for message, hint, module in check.variants:
            out.append(f"{check.level} (reported by {md.code(module)})\n: {md.text(message)}\n")
            if hint:
                out.append(f"Hint\n: {md.text(hint)}\n")
        if check.details:
            out.append(f"where {md.code('{message}')} is one of:\n")
            out.append("".join(f"- {md.code(detail)}\n" for detail in check.details))
    return "\n".join(out)
