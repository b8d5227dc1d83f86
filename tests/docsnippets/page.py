"""One page's run: a namespace for its Python, a throwaway project for its settings, URLconf and
modules, and a shell session (variables) for its console blocks; all gone when the page ends.

The queue store is the caller's: ``run_page`` expects ``settings.FDBQUEUE`` to point at a fresh
store already (the pytest items do it with the app's plugin, ``fresh_store``), and a database
Django's test machinery has set up (the ``django_db`` marker).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any, Iterator

from django.conf import settings as django_settings
from django.test.utils import override_settings
from sybil import Example

from . import blocks
from .errors import SnippetFailure

TOKEN_AUTHENTICATION = "knox.auth.TokenAuthentication"


class Page:
    """The state one page's blocks share, in order."""

    def __init__(self, path: Path, workdir: Path) -> None:
        self.path = Path(path)
        self.workdir = Path(workdir)
        # A real module's namespace, registered while the page runs, so what the page defines
        # (dataclasses, pickled values) finds its module as it would in a script.
        self.module = types.ModuleType(f"docs_snippets_page_{id(self)}")
        self.module.__file__ = str(self.path)
        self.namespace: dict[str, Any] = self.module.__dict__
        self.variables: dict[str, str] = {}  # the console blocks' shell variables
        self.environment: dict[str, str] = {}  # the exported ones, for manage.py commands
        self.settings_namespace: dict[str, Any] | None = None
        self.urls_module: Any = None
        self.modules_dir = self.workdir / "modules"
        self.stack = contextlib.ExitStack()
        self.module_names: set[str] = set()

    def __enter__(self) -> "Page":
        self.stack.enter_context(view_defaults_follow_settings())
        self.stack.enter_context(override_settings(**project_settings()))
        self.modules_dir.mkdir(parents=True, exist_ok=True)
        sys.modules[self.module.__name__] = self.module
        self.module_names.add(self.module.__name__)
        sys.path.insert(0, str(self.modules_dir))
        self.stack.callback(self._forget_modules)
        self.stack.enter_context(declarations_restored())
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stack.close()

    def _forget_modules(self) -> None:
        """Modules the page wrote or made leave sys.modules and sys.path with it."""
        with contextlib.suppress(ValueError):
            sys.path.remove(str(self.modules_dir))
        prefix = str(self.modules_dir) + os.sep
        for name, module in list(sys.modules.items()):
            if name in self.module_names or (getattr(module, "__file__", None) or "").startswith(prefix):
                del sys.modules[name]
        importlib.invalidate_caches()


@contextlib.contextmanager
def declarations_restored() -> Iterator[None]:
    """Schedules the page declares (``@periodic``, ``declare``) leave the process's registry with
    it, as its modules leave sys.modules: the next page, or engine, starts without them."""
    from django_fdbqueue.schedules import registry

    saved = dict(registry._registry)
    try:
        yield
    finally:
        registry._registry.clear()
        registry._registry.update(saved)


#: APIView's class attributes that DRF fills from REST_FRAMEWORK, and the settings they come from.
_VIEW_DEFAULTS = {
    "authentication_classes": "DEFAULT_AUTHENTICATION_CLASSES",
    "permission_classes": "DEFAULT_PERMISSION_CLASSES",
    "throttle_classes": "DEFAULT_THROTTLE_CLASSES",
}


@contextlib.contextmanager
def view_defaults_follow_settings() -> Iterator[None]:
    """While a page runs, REST_FRAMEWORK's default classes reach the views.

    DRF binds them to ``APIView`` once, when ``rest_framework.views`` is imported, so an override
    made later (the page's token authentication, a settings snippet's classes) would reach only
    a process that imported the views after it: a page's answers would depend on the tests that
    ran before it. A project starts with its settings, so the page's views follow them here.
    """
    from django.test.signals import setting_changed
    from rest_framework.settings import api_settings
    from rest_framework.views import APIView

    saved = {attribute: APIView.__dict__[attribute] for attribute in _VIEW_DEFAULTS}

    def follow(*, setting: str, **kwargs: Any) -> None:
        if setting == "REST_FRAMEWORK":  # after DRF's own receiver has reloaded api_settings
            for attribute, name in _VIEW_DEFAULTS.items():
                setattr(APIView, attribute, getattr(api_settings, name))

    setting_changed.connect(follow)
    try:
        yield
    finally:
        setting_changed.disconnect(follow)
        for attribute, value in saved.items():
            setattr(APIView, attribute, value)


def project_settings() -> dict[str, Any]:
    """What the page's project adds to the test settings: API tokens, as the installation steps
    set them up (knox's TokenAuthentication first), besides session and basic authentication."""
    rest = dict(getattr(django_settings, "REST_FRAMEWORK", {}))
    classes = list(rest.get("DEFAULT_AUTHENTICATION_CLASSES", []))
    if TOKEN_AUTHENTICATION not in classes:
        rest["DEFAULT_AUTHENTICATION_CLASSES"] = [TOKEN_AUTHENTICATION, *classes]
    return {"REST_FRAMEWORK": rest}


def evaluate(example: Example) -> None:
    """Sybil's evaluator for every block: run it by its language, on the document's page."""
    __tracebackhide__ = True
    from . import console, python

    page: Page = example.document.page  # type: ignore[attr-defined]
    block: blocks.Block = example.parsed
    if block.language == "python":
        python.run_block(page, block)
    elif block.language == "console":
        console.run_block(page, block)
    else:
        language = block.language.removeprefix("refused:")
        raise SnippetFailure(
            block.location,
            (
                f"a ```{language} block is neither run nor one of the languages that say why not: "
                "use ```python or ```console for what the tests can run, ```bash for commands that "
                "cannot run in a test (pip, systemctl, fdbcli...), ```text for output, "
                f"or one of {', '.join(sorted(blocks.NOT_RUN - {'none'}))} for files and data."
                if language
                else "a fenced block with no language: say what it is (```python, "
                "```console, ```bash, ```text, ```ini...)."
            ),
        )


def run_page(path: Path | str, workdir: Path | str) -> int:
    """Run every block of the page at ``path`` in order (``workdir``: an empty directory for its
    throwaway project); raise SnippetFailure at the first that fails. Returns the blocks run."""
    __tracebackhide__ = True
    document = blocks.parse(Path(path), evaluate)
    examples = list(document.examples())
    with Page(Path(path), Path(workdir)) as page:
        document.page = page  # type: ignore[attr-defined]
        document.namespace = page.namespace
        for example in examples:
            example.namespace = page.namespace
            example.evaluate()
    return len(examples)
