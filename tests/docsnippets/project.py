"""The throwaway project a page's settings and URLconf snippets are added to: the files
``django-admin startproject mysite`` writes, rendered from the installed Django's template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import django
from django.template import Context, Engine

NAME = "mysite"
TEMPLATE_DIR = Path(django.__file__).parent / "conf" / "project_template" / "project_name"


def _render(template: str) -> str:
    """A startproject template file, rendered the way startproject renders it."""
    text = (TEMPLATE_DIR / template).read_text(encoding="utf-8")
    context = Context(
        {
            "project_name": NAME,
            "project_directory": NAME,
            "secret_key": "docs-snippets-only-not-secret",
            "docs_version": "stable" if django.VERSION[3] == "final" else "dev",
            "django_version": django.get_version(),
        },
        autoescape=False,
    )
    return Engine().from_string(text).render(context)


def settings_namespace(workdir: Path) -> dict[str, Any]:
    """A fresh settings module's namespace: startproject's settings, as if at
    ``workdir/mysite/settings.py`` (so ``BASE_DIR`` is ``workdir``)."""
    namespace: dict[str, Any] = {"__name__": f"{NAME}.settings", "__file__": str(workdir / NAME / "settings.py")}
    exec(compile(_render("settings.py-tpl"), f"<startproject {NAME}/settings.py>", "exec"), namespace)
    return namespace


def urls_source() -> str:
    """startproject's ``urls.py``."""
    return _render("urls.py-tpl")
