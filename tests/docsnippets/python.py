"""```python blocks: plain code in the page's namespace; ``# settings.py``, ``# urls.py`` and
``# pkg/module.py`` blocks as files of the page's throwaway project.

Code is compiled with the page as its file name and its real line numbers, so a traceback
points at the page's line (and shows it).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import traceback
import types
from pathlib import Path
from typing import Any

from django.conf import settings as django_settings
from django.core.checks.urls import check_resolver
from django.test.utils import override_settings
from django.urls import URLPattern, URLResolver, clear_url_caches, resolve, reverse
from django.urls.resolvers import RegexPattern

from . import project, settings_check
from .blocks import Block
from .errors import SnippetFailure

FILE_LINE = re.compile(r"#\s*(?P<path>[\w./-]+\.py)\s*$")


def run_block(page: Any, block: Block) -> None:
    __tracebackhide__ = True
    first = block.source.split("\n", 1)[0].strip()
    match = FILE_LINE.fullmatch(first)
    if match is None:
        execute(block, page.namespace)
        return
    path = match["path"]
    if Path(path).name == "settings.py":
        run_settings(page, block)
    elif path in ("urls.py", f"{project.NAME}/urls.py"):
        run_urls(page, block)
    else:
        run_module(page, block, path)


def execute(block: Block, namespace: dict[str, Any]) -> None:
    """Run the block's code in ``namespace``; an exception fails with the page's lines."""
    __tracebackhide__ = True
    code = compile("\n" * (block.first_line - 1) + block.source, str(block.path), "exec", dont_inherit=True)
    try:
        exec(code, namespace)
    except Exception as error:
        raise SnippetFailure(block.location, "the ```python block raised:\n" + page_traceback(error, block)) from None


def page_traceback(error: BaseException, block: Block) -> str:
    """The traceback from the page's own frames on (the runner's frames say nothing useful)."""
    entries = traceback.extract_tb(error.__traceback__)
    start = next((i for i, entry in enumerate(entries) if entry.filename == str(block.path)), 0)
    lines = traceback.format_list(entries[start:]) + traceback.format_exception_only(error)
    return "".join(lines).rstrip()


def run_settings(page: Any, block: Block) -> None:
    """Add the snippet to the page's settings module (startproject's, then the page's earlier
    settings snippets), check the app settings in it, and use them for the page's later blocks."""
    __tracebackhide__ = True
    if page.settings_namespace is None:
        page.settings_namespace = project.settings_namespace(page.workdir)
    execute(block, page.settings_namespace)
    problems = settings_check.problems(page.settings_namespace)
    if problems:
        raise SnippetFailure(
            block.location,
            "the settings snippet does not pass the app's checks:\n"
            + "\n".join(f"  {problem}" for problem in problems),
        )
    overrides = settings_check.later_overrides(page.settings_namespace, django_settings.FDBQUEUE)
    if overrides:
        page.stack.enter_context(override_settings(**overrides))
        from django_fdbqueue import connection

        connection.reset_database()
        page.stack.callback(connection.reset_database)


def run_urls(page: Any, block: Block) -> None:
    """Add the snippet to the page's URLconf (startproject's first), check and resolve its
    patterns; the page's later ``curl`` lines are served by it."""
    __tracebackhide__ = True
    if page.urls_module is None:
        name = f"docs_snippets_urls_{id(page)}"
        page.urls_module = types.ModuleType(name)
        page.urls_module.__file__ = str(page.workdir / project.NAME / "urls.py")
        exec(project.urls_source(), page.urls_module.__dict__)
        sys.modules[name] = page.urls_module
        page.module_names.add(name)
        page.stack.enter_context(override_settings(ROOT_URLCONF=name))
    execute(block, page.urls_module.__dict__)
    clear_url_caches()  # the resolver of the module's earlier patterns is cached by its name
    problems = url_problems(page.urls_module)
    if problems:
        raise SnippetFailure(
            block.location,
            "the URLconf snippet's patterns do not resolve:\n" + "\n".join(f"  {problem}" for problem in problems),
        )


def url_problems(module: types.ModuleType) -> list[str]:
    """Django's URL checks, then each named pattern without arguments reversed and resolved."""
    if not isinstance(getattr(module, "urlpatterns", None), (list, tuple)):
        return ["the URLconf has no urlpatterns list"]
    resolver = URLResolver(RegexPattern(r"^/"), module)
    problems = [f"{m.id}: {m.msg}" for m in check_resolver(resolver) if m.is_serious() or m.level >= 30]
    if problems:
        return problems
    for name in _plain_names(resolver.url_patterns):
        try:
            found = resolve(reverse(name, urlconf=module.__name__), urlconf=module.__name__)
        except Exception as error:  # NoReverseMatch, Resolver404, or an include that fails
            problems.append(f"{name!r}: {type(error).__name__}: {error}")
            continue
        if found.view_name != name:
            problems.append(f"{name!r} reverses to a path that resolves to {found.view_name!r}")
    return problems


def _plain_names(patterns: list, namespace: str = "", plain: bool = True) -> list[str]:
    """Names of patterns (qualified by their namespaces) whose paths take no arguments."""
    names = []
    for entry in patterns:
        no_args = plain and not entry.pattern.converters and not entry.pattern.regex.groups
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            names += _plain_names(entry.url_patterns, inner, no_args)
        elif isinstance(entry, URLPattern) and entry.name and no_args:
            names.append(namespace + entry.name)
    return list(dict.fromkeys(names))


def run_module(page: Any, block: Block, path: str) -> None:
    """Write the block as ``path`` in the page's package directory and import it."""
    __tracebackhide__ = True
    parts = Path(path).with_suffix("").parts
    if Path(path).is_absolute() or ".." in parts or not all(p.isidentifier() for p in parts):
        raise SnippetFailure(block.location, f"# {path}: give a relative module path, e.g. # myapp/tasks.py")
    target = page.modules_dir / path
    target.parent.mkdir(parents=True, exist_ok=True)
    for depth in range(1, len(parts)):
        init = page.modules_dir.joinpath(*parts[:depth], "__init__.py")
        init.touch(exist_ok=True)
    target.write_text("\n" * (block.first_line - 1) + block.source, encoding="utf-8")
    dotted = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    _check_not_shadowing(page, block, parts[0])
    sys.modules.pop(dotted, None)
    importlib.invalidate_caches()
    if "." in dotted:
        importlib.import_module(dotted.rpartition(".")[0])
    # Executed here rather than imported, so a traceback shows the page's lines; later imports
    # (the page's, Django's import_string) find it in sys.modules, or on disk.
    spec = importlib.util.spec_from_file_location(dotted, target)
    module = importlib.util.module_from_spec(spec)
    sys.modules[dotted] = module
    page.module_names.add(dotted)
    try:
        execute(block, module.__dict__)
    except SnippetFailure:
        del sys.modules[dotted]
        raise
    if "." in dotted:
        parent, _, child = dotted.rpartition(".")
        setattr(sys.modules[parent], child, module)


def _check_not_shadowing(page: Any, block: Block, top: str) -> None:
    module = sys.modules.get(top)
    where = getattr(module, "__file__", None) or ""
    if module is not None and not where.startswith(str(page.modules_dir)):
        raise SnippetFailure(
            block.location,
            f"the module name {top!r} is already taken by {where or 'a built-in'}: "
            "name the snippet's package after your app, e.g. # myapp/tasks.py",
        )
