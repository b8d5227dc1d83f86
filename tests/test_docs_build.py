"""The documentation site builds with warnings as errors, and its generated pages list what the code has.

The site is built once per run, the way CI builds it (``python -m sphinx -W --keep-going``), in a
subprocess with a bounded time. The page checks find what the code has on their own (check ids in
the source, the command's real parser, the served schema, ...) rather than through the docs'
generators, so a generator that drops something fails here.
"""

from __future__ import annotations

import argparse
import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

import django_fdbqueue

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# The app's source as imported: the checkout, or the installed wheel under scripts/test-lowest.
APP = Path(django_fdbqueue.__file__).resolve().parent
BUILD_TIMEOUT = 600


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("docs-html")
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "--keep-going",
        "-q",
        "-b",
        "html",
        "-d",
        str(out / ".doctrees"),
        str(DOCS),
        str(out),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    return out, result


def page_text(site: tuple[Path, subprocess.CompletedProcess], name: str) -> str:
    """A built page's text (tags dropped, entities decoded), or a failure naming the build's output."""
    out, result = site
    path = out / name
    if not path.exists():
        pytest.fail(f"{name} was not built.\n{result.stdout}\n{result.stderr}")
    body = re.sub(r"<(script|style)\b.*?</\1>", "", path.read_text(encoding="utf-8"), flags=re.S)
    # Tags go without a trace: highlighted code is one span per token.
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def page_html(site: tuple[Path, subprocess.CompletedProcess], name: str) -> str:
    page_text(site, name)  # fails clearly when missing
    return (site[0] / name).read_text(encoding="utf-8")


def test_site_builds_without_warnings(site):
    _, result = site
    assert result.returncode == 0 and not result.stderr.strip(), (
        f"sphinx exited with {result.returncode}; its warnings:\n{result.stderr}\n{result.stdout}"
    )


def test_checks_page_lists_every_check_id(site):
    pattern = re.compile(r"""["']((?:django_)?fdbqueue\.[CEWI]\d{3})["']""")
    ids = {m for path in APP.rglob("*.py") for m in pattern.findall(path.read_text())}
    assert "fdbqueue.E001" in ids and "fdbqueue.E101" in ids
    text = page_text(site, "reference/checks.html")
    assert sorted(i for i in ids if i not in text) == []


def test_settings_page_lists_every_key_and_option(site):
    from django_fdbqueue import conf
    from django_fdbqueue.tasks.backend import DEFAULT_OPTIONS

    text = page_text(site, "reference/settings.html")
    assert [k for k in [*conf.KEYS, *DEFAULT_OPTIONS] if k not in text] == []
    assert repr(conf.DEFAULT_TIMEOUT) in text and str(conf.DEFAULT_API_VERSION) in text


def _parsers(parser: argparse.ArgumentParser, path: str):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_cli_page_lists_every_subcommand_and_option(site):
    from django.core.management import load_command_class

    text = page_text(site, "reference/cli.html")
    missing = []
    for command in ("fdbqueue", "fdbqueue_demo"):
        parser = load_command_class("django_fdbqueue", command).create_parser("manage.py", command)
        for path, sub in _parsers(parser, command):
            if path not in text:
                missing.append(path)
            section = text.split(path, 1)[-1] if path in text else text
            missing += [
                f"{path} {opt}"
                for action in sub._actions
                for opt in action.option_strings
                if action.help != argparse.SUPPRESS and opt not in section
            ]
    assert missing == []
    assert "fdbqueue token create" in text and "fdbqueue worker" in text


def test_rest_page_lists_every_operation_and_schema(site):
    from django.urls import include, path
    from drf_spectacular.generators import SchemaGenerator

    from django_fdbqueue.api.urls import router

    api = [path("api/", include("django_fdbqueue.api.urls"))]  # mounted as the installation steps do
    schema = SchemaGenerator(patterns=api).get_schema(request=None, public=True)
    text = page_text(site, "reference/rest-api.html")
    operations = [
        f"{method.upper()} {path}"
        for path, item in schema["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    ]
    assert len(operations) >= len([p for p in router.urls if getattr(p.callback, "actions", None)])
    assert [op for op in operations if op not in text] == []
    assert [name for name in schema["components"]["schemas"] if name not in text] == []


def test_metrics_page_lists_every_metric(site):
    pattern = re.compile(r"""(?:Counter|Histogram|Gauge|Summary|MetricFamily)\(\s*["'](fdbqueue_\w+)["']""")
    sources = (APP / "metrics").glob("*.py")
    names = {m for path in sources for m in pattern.findall(path.read_text())}
    assert "fdbqueue_queue_items" in names and "fdbqueue_operations" in names
    text = page_text(site, "reference/metrics.html")
    assert sorted(n for n in names if n not in text) == []


def test_errors_page_maps_every_code_to_its_status(site):
    from django_fdbqueue import exceptions
    from django_fdbqueue.api.exceptions import queue_error_status

    rows = re.findall(r"<tr.*?</tr>", page_html(site, "reference/errors.html"), flags=re.S)
    for name in exceptions.__all__:
        cls = getattr(exceptions, name)
        row = next((r for r in rows if f">{cls.code}<" in r), None)
        assert row is not None, f"{cls.code} ({name}) is not on the errors page"
        assert f">{queue_error_status(cls())}" in row, f"{cls.code}: wrong status in {row}"


def test_python_api_page_documents_the_public_surface(site):
    from django_fdbqueue import exceptions, service, worker

    page = page_html(site, "reference/python-api.html")
    expected = [f"{module.__name__}.{name}" for module in (service, exceptions, worker) for name in module.__all__]
    expected += [
        "django_fdbqueue.connection.get_database",
        "django_fdbqueue.fdbapi.transactional",
        "django_fdbqueue.tasks.FDBQueueBackend",
        "django_fdbqueue.testing.plugin.fdbqueue_store",
    ]
    assert [name for name in expected if f'id="{name}"' not in page] == []


def test_front_page_and_moved_pages(site):
    assert "service.claim(db" in page_text(site, "index.html")
    assert "One name for one thing" in page_text(site, "reference/names.html")
    assert "This release" in page_text(site, "reference/changes.html")
    assert (site[0] / "_static" / "admin-queue.png").exists()


# -- the site's presentation: the front page, the sidebar, the footer, code blocks, types -----------


def test_the_front_page_leads_with_the_four_kinds_of_page(site):
    """The first screen is an introduction and the links to the tutorial, guides, reference and
    explanation, before the install section, the example and the screenshot."""
    article = page_html(site, "index.html").split("<article", 1)[1]
    positions = [
        article.find(f'href="{target}"')
        for target in ("tutorial.html", "howto/index.html", "reference/index.html", "explanation/index.html")
    ]
    assert -1 not in positions, positions
    assert max(positions) < article.find('id="install"') < article.find("admin-queue.png")


def test_the_sidebar_lists_every_page_of_each_section(site):
    """Every guide (and reference and explanation page) is a first-level entry of the sidebar,
    not hidden behind a collapsed one."""
    sidebar = page_html(site, "index.html").split('class="sidebar-tree"', 1)[1].split("</nav>", 1)[0]
    first_level = set(re.findall(r'<li class="toctree-l1[^"]*"><a class="reference internal" href="([^"]+)"', sidebar))
    pages = {
        f"{section}/{path.stem}.html"
        for section in ("howto", "reference", "explanation")
        for path in (DOCS / section).glob("*.md")
        if path.stem != "index"
    }
    assert len([p for p in pages if p.startswith("howto/")]) >= 16
    assert sorted(pages - first_level) == []
    assert 'class="toctree-l2' not in sidebar


def test_the_footer_names_its_copyright_holder(site):
    footer = re.search(r'<div class="copyright">(.*?)</div>', page_html(site, "index.html"), flags=re.S)
    assert footer is not None
    words = html.unescape(footer.group(1)).replace("Copyright", "").replace("©", "").strip()
    assert "contributors" in words


def test_code_blocks_have_a_copy_button(site):
    assert re.search(r'<script src="[^"]*copybutton\.js', page_html(site, "howto/tasks.html"))
    assert (site[0] / "_static" / "copybutton.js").exists()


def test_the_python_api_reference_types_the_handle_and_the_key_limits(site):
    text = page_text(site, "reference/python-api.html")
    params = re.findall(r"\b(db_or_tr|concurrency|rate) \(([^)]*)\)", text)
    assert params and [p for p in params if "Any" in p[1]] == []
    assert ("db_or_tr", "Database | Transaction") in params
    assert ("concurrency", "int | None") in params and ("rate", "float | None") in params
