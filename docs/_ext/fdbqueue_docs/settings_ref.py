"""reference/settings.md: every FDBQUEUE key and every Tasks backend option, read from the code.

FDBQUEUE: the keys are ``conf.KEYS``, each key's type and default are those of its
``QueueSettings`` field, its meaning is the field's ``#:`` comment, and the checks that look at
it are the check ids whose messages name it. The Tasks backend's OPTIONS: the keys and defaults
are ``DEFAULT_OPTIONS``, the meaning is the comment above each key, the type the annotation of the
attribute the backend reads it into.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect

from sphinx.pycode import ModuleAnalyzer

from . import checks_ref
from . import markdown as md


def _attr_docs(module: str, cls: str) -> dict[str, str]:
    docs = ModuleAnalyzer.for_module(module).find_attr_docs()
    return {name: " ".join(" ".join(lines).split()) for (scope, name), lines in docs.items() if scope == cls}


def _checks_naming(key: str, checks: dict[str, checks_ref.Check]) -> list[str]:
    return [
        ident for ident, check in checks.items() if any(f"['{key}']" in message for message, _, _ in check.variants)
    ]


def fdbqueue_rows() -> list[list[str]]:
    from django_fdbqueue import conf

    fields = {f.name: f for f in dataclasses.fields(conf.QueueSettings)}
    docs = _attr_docs("django_fdbqueue.conf", "QueueSettings")
    checks = checks_ref.collect()
    rows = []
    for key, name in conf.KEYS.items():
        if name not in docs:
            raise ValueError(f"QueueSettings.{name} (FDBQUEUE[{key!r}]) has no #: comment to document it")
        f = fields[name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        ids = _checks_naming(key, checks)
        rows.append(
            [
                f"{md.code(key)}",
                md.code(f.type),
                md.code(repr(default)),
                md.prose(docs[name], first_paragraph=False),
                ", ".join(f"{{ref}}`{i} <{checks_ref.label(i)}>`" for i in ids) or "—",
            ]
        )
    return rows


def _comments_above(lines: list[str], lineno: int) -> str:
    """The ``#`` comment lines right above line ``lineno`` (1-based), joined."""
    found = []
    index = lineno - 2
    while index >= 0 and lines[index].strip().startswith("#"):
        found.insert(0, lines[index].strip().lstrip("#").strip())
        index -= 1
    return " ".join(found)


def _option_types(backend_cls: type) -> dict[str, str]:
    """OPTION -> annotation of ``self.x: T = merged["OPTION"]`` in the backend's ``__init__``."""
    tree = ast.parse(inspect.getsource(backend_cls.__init__).strip().replace("\n    ", "\n"))
    types = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Subscript):
            key = node.value.slice
            if isinstance(key, ast.Constant):
                types[key.value] = ast.unparse(node.annotation)
    return types


def tasks_rows() -> list[list[str]]:
    from django_fdbqueue.tasks import backend

    source = inspect.getsource(backend)
    lines = source.splitlines()
    tree = ast.parse(source)
    dict_node = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "DEFAULT_OPTIONS"
    )
    types = _option_types(backend.FDBQueueBackend)
    rows = []
    for key_node in dict_node.keys:
        key = key_node.value
        meaning = _comments_above(lines, key_node.lineno)
        if not meaning:
            raise ValueError(f"DEFAULT_OPTIONS[{key!r}] has no comment above it to document it")
        rows.append(
            [
                md.code(key),
                md.code(types.get(key, "")),
                md.code(repr(backend.DEFAULT_OPTIONS[key])),
                md.prose(meaning, first_paragraph=False),
            ]
        )
    return rows


def _entries(rows: list[list[str]], facts: list[str], prefix: str) -> str:
    """One subsection per key: its name as the heading (a stable anchor), a line of short facts
    (type, default, checks), then its meaning. Narrow screens read it; a wide table they cannot."""
    out = []
    for key, *values in rows:  # values: type, default, meaning, then the checks if any
        name = key.strip("`")
        out.append(f"({prefix}-{md.slug(name)})=\n### {key}\n")
        cells = [values[0], values[1]] + values[3:]
        out.append(" · ".join(f"{label}: {cell}" for label, cell in zip(facts, cells)) + "\n")
        out.append(values[2] + "\n")
    return "\n".join(out)


def render() -> str:
    out = [
        "## `FDBQUEUE`\n",
        "One dict in the project's settings; every key is optional. Values that cannot work are "
        "reported by the {doc}`system checks <checks>` and refused with `ImproperlyConfigured` when "
        "the app first reads its settings.\n",
        _entries(fdbqueue_rows(), ["Type", "Default", "Checks"], "setting"),
        "(settings-tasks-options)=\n## Tasks backend `OPTIONS`\n",
        "The `OPTIONS` of a `TASKS` entry whose `BACKEND` is "
        "`django_fdbqueue.tasks.FDBQueueBackend`. Invalid values are reported by check "
        f"{{ref}}`fdbqueue.E101 <{checks_ref.label('fdbqueue.E101')}>`.\n",
        _entries(tasks_rows(), ["Type", "Default"], "tasks-option"),
    ]
    return "\n".join(out)
