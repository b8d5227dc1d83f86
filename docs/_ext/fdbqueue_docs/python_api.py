"""The ``fdbqueue-autodoc`` directive: autodoc of a module's public names, found at build time.

``.. fdbqueue-autodoc:: django_fdbqueue.service`` documents every name of the module's
``__all__`` (or, without one, its public names defined in the package), each with the autodoc
directive its kind needs, so the page follows the module as names come and go. ``:only:`` keeps
some kinds (``function``, ``class``, ``exception``, ``data``); ``:exclude:`` drops names.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.pycode import PycodeError
from sphinx.util.inspect import object_description
from sphinx.util.docutils import SphinxDirective
from sphinx.util.parsing import nested_parse_to_nodes

KINDS = ("function", "class", "exception", "data")


def public_names(module: Any) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    package = module.__name__.split(".")[0]
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and (getattr(value, "__module__", None) or "").startswith(package)
    ]


def kind_of(value: Any) -> str:
    if inspect.isclass(value):
        return "exception" if issubclass(value, BaseException) else "class"
    if inspect.isroutine(value):
        return "function"
    return "data"


@functools.lru_cache(maxsize=None)
def attribute_docs(package: str) -> dict[str, list[str]]:
    """NAME -> its ``#:`` comment, for the module-level names of the modules of ``package``
    (the module documented and its submodules, where its public names are defined)."""
    from .source import package_modules

    found: dict[str, list[str]] = {}
    for module in package_modules(package):
        try:
            docs = ModuleAnalyzer.for_module(module.name).find_attr_docs()
        except PycodeError:
            continue
        for (scope, attr), lines in docs.items():
            if scope == "":
                found.setdefault(attr, list(lines))
    return found


def data_entry(module: str, name: str, value: Any) -> list[str]:
    """A ``py:data`` entry: the value, and the ``#:`` comment where the name is defined (autodoc
    would show the docstring of the value's type, such as int's, instead)."""
    doc = attribute_docs(module).get(name, [])
    shown = object_description(value)
    lines = [f".. py:data:: {module}.{name}"]
    if len(shown) <= 120:
        lines.append(f"   :value: {shown}")
    lines.append("")
    lines += [f"   {line}" for line in doc]
    lines.append("")
    return lines


class PublicAPI(SphinxDirective):
    required_arguments = 1
    option_spec = {"only": directives.unchanged, "exclude": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        name = self.arguments[0]
        module = importlib.import_module(name)
        only = set((self.options.get("only") or " ".join(KINDS)).replace(",", " ").split())
        exclude = set(self.options.get("exclude", "").replace(",", " ").split())
        if only - set(KINDS):
            raise self.error(f":only: takes {', '.join(KINDS)}, not {', '.join(sorted(only - set(KINDS)))}")
        lines: list[str] = []
        for public in public_names(module):
            kind = kind_of(getattr(module, public))
            if kind not in only or public in exclude:
                continue
            if kind == "data":
                lines += data_entry(name, public, getattr(module, public))
                continue
            lines.append(f".. auto{kind}:: {name}.{public}")
            if kind in ("class", "exception"):
                lines.append("   :members:")
            lines.append("")
        if not lines:
            raise self.error(f"{name} has no public names of kind {', '.join(sorted(only))}")
        self.env.note_dependency(inspect.getsourcefile(module) or "")
        return nested_parse_to_nodes(self.state, StringList(lines, source=f"<fdbqueue-autodoc {name}>"))


def setup(app: Sphinx) -> None:
    app.add_directive("fdbqueue-autodoc", PublicAPI)
