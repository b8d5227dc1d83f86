"""Read messages out of the app's source: the templates of f-strings, resolved where they can be.

Check messages and hints are f-strings; the reference shows them as written, with each
placeholder replaced by its value when it is a module constant (``SETTING_NAME`` -> FDBQUEUE)
and shown as ``{expression}`` otherwise.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

PACKAGE = "django_fdbqueue"


@dataclass
class Module:
    name: str
    tree: ast.Module

    def namespace(self) -> dict[str, Any]:
        """The imported module's names (empty when an optional dependency is missing)."""
        try:
            return vars(importlib.import_module(self.name))
        except ImportError:
            return {}


def package_modules(package: str = PACKAGE) -> Iterator[Module]:
    """Every module of the package with its syntax tree (nothing is imported but packages)."""
    root = importlib.import_module(package)
    names = [package] + [
        info.name for info in pkgutil.walk_packages(getattr(root, "__path__", []), prefix=f"{package}.")
    ]
    for name in sorted(names):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        yield Module(name, ast.parse(Path(spec.origin).read_text(encoding="utf-8")))


def local_strings(function: ast.AST | None) -> dict[str, str]:
    """Names assigned a plain string inside ``function`` (``hint = "..."``), or imported there
    (``from ... import INSTALL_HINT``)."""
    found: dict[str, str] = {}
    if function is None:
        return found
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found[node.targets[0].id] = value.value
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                value = getattr(importlib.import_module(node.module), alias.name, None)
                if isinstance(value, str) and alias.name.isupper():
                    found[alias.asname or alias.name] = value
    return found


def template(node: ast.AST, namespace: dict[str, Any], local: dict[str, str]) -> str:
    """The text an expression builds, placeholders as ``{expr}`` unless they are constants."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(template(part, namespace, local) for part in node.values)
    if isinstance(node, ast.FormattedValue):
        value = constant(node.value, namespace, local)
        if value is not None:
            if node.conversion == ord("r"):
                return repr(value)
            spec = template(node.format_spec, namespace, local) if node.format_spec else ""
            return format(value, spec)
        return "{" + ast.unparse(node.value) + "}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template(node.left, namespace, local) + template(node.right, namespace, local)
    if isinstance(node, ast.Name):
        value = local.get(node.id, namespace.get(node.id))
        if isinstance(value, str):
            return value
    return "{" + ast.unparse(node) + "}"


def constant(node: ast.AST, namespace: dict[str, Any], local: dict[str, str]) -> Any:
    """The value of a constant a placeholder names (``NAME`` or ``module.NAME``), else None.

    Only upper-case names count: the value of anything else depends on the moment of the check.
    """
    if isinstance(node, ast.Name) and node.id in local:
        return local[node.id]
    dotted = ast.unparse(node)
    if not re.fullmatch(r"(\w+\.)*[A-Z][A-Z0-9_]*", dotted):
        return None
    head, *rest = dotted.split(".")
    value = namespace.get(head)
    for name in rest:
        value = getattr(value, name, None)
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    return None


def parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    """Each node's parent, to find the function a call is in."""
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def enclosing_function(node: ast.AST, parent: dict[ast.AST, ast.AST]) -> ast.AST | None:
    while node in parent:
        node = parent[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None
