"""The README is a front page: short, and every link in it leads somewhere.

Its ```python blocks are run by tests/test_readme_snippets.py; its install instructions point to
the tutorial, which tests/test_tutorial.py runs end to end. Here: the length, the relative links
and images (to a file of the repository, and to a heading of a Markdown page when they name one),
and what the page says about the scripts and the docs' extra.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.doc_blocks import REPO

README = REPO / "README.md"
MAX_LINES = 200
# [text](target) and ![alt](target), and <img src="target">; a target has no blanks.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"")


def readme() -> str:
    return README.read_text(encoding="utf-8")


def relative_links(text: str) -> list[str]:
    """The targets that are not URLs with a scheme (https:, mailto:) and not inside code."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = [first or second for first, second in LINK.findall(text)]
    return [target for target in targets if not urlsplit(target).scheme]


def github_anchor(heading: str) -> str:
    """The id GitHub gives a Markdown heading: lower case, punctuation dropped, blanks to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {github_anchor(heading) for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M)}


def test_the_readme_is_at_most_200_lines():
    assert len(readme().splitlines()) <= MAX_LINES


def test_every_relative_link_and_image_resolves():
    links = relative_links(readme())
    assert "docs/tutorial.md" in links and "docs/_static/admin-queue.png" in links, links
    for link in links:
        parts = urlsplit(link)
        target = (README.parent / unquote(parts.path)).resolve() if parts.path else README
        assert target.is_relative_to(REPO) and target.exists(), f"{link}: no such file"
        if parts.fragment:
            assert target.suffix == ".md", f"{link}: an anchor into a page that is not Markdown"
            assert parts.fragment in anchors(target), f"{link}: {target.name} has no heading with that anchor"


def test_the_link_checker_sees_links_and_skips_code():
    text = "[a](docs/x.md) ![b](img.png) [c](https://example.com) `[d](no.md)`\n```\n[e](no2.md)\n```\n"
    assert relative_links(text) == ["docs/x.md", "img.png"]
    assert github_anchor("Run the app's test suite against a cluster") == "run-the-apps-test-suite-against-a-cluster"


def test_the_two_commands_and_the_docs_build_exist():
    text = readme()
    for script in ("scripts/demo", "scripts/test", "scripts/test-lowest", ".ci/run"):
        assert script in text and os.access(REPO / script, os.X_OK), script
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert 'pip install -e ".[docs]"' in text and "docs" in extras
    assert "python -m sphinx -W docs docs/_build/html" in text
    assert (REPO / "docs" / "conf.py").is_file()


# Runs scripts/venv.sh's install_system_packages as root would, with apt-get and id stood in
# for: one package missing, one present (a program every machine has).
SYSTEM_PACKAGES_AS_ROOT = """
. scripts/venv.sh
SYSTEM_PACKAGES=("chromium:$1/chromium:the browser tests" "redis-server:/bin/sh:the bench's Redis reference tests")
id() { echo 0; }
apt_get() { echo "apt-get $*"; }
install_system_packages
"""


def _as_root(tmp_path: Path, **env: str) -> str:
    done = subprocess.run(
        ["bash", "-c", SYSTEM_PACKAGES_AS_ROOT, "as-root", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_scripts_test_says_what_it_installs_as_root_before_installing_it(tmp_path):
    """As root ./scripts/test installs Debian packages: it says which, and how not to, first."""
    output = _as_root(tmp_path).splitlines()
    said = next(i for i, line in enumerate(output) if "installing Debian's chromium with apt-get" in line)
    installed = next(i for i, line in enumerate(output) if line.startswith("apt-get "))
    assert said < installed and "FDBQUEUE_TEST_NO_APT=1" in "\n".join(output[said:installed])
    assert "redis-server" not in output[said]  # present: not installed again
    assert "as root, it first says so" in readme() and "FDBQUEUE_TEST_NO_APT=1" in readme()


def test_scripts_test_installs_nothing_outside_the_venv_when_asked(tmp_path):
    output = _as_root(tmp_path, FDBQUEUE_TEST_NO_APT="1")
    assert "apt-get update" not in output and "sudo apt-get install chromium" in output


DEMO_API_ANONYMOUS = """
import django
from django.test import Client

django.setup()
for path in ("/api/", "/api/queues/"):
    response = Client(HTTP_HOST="127.0.0.1:8000").get(path, headers={"Accept": "application/json"})
    print(path, response.status_code, response.json()["code"])
"""


def test_the_demo_s_api_answers_401_until_you_log_in_as_the_readme_says():
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DJANGO_SETTINGS_MODULE="demo.settings", PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "demo_project")])
    )
    done = subprocess.run(
        [sys.executable, "-c", DEMO_API_ANONYMOUS],
        cwd=REPO / "demo_project",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["/api/ 401 not_authenticated", "/api/queues/ 401 not_authenticated"]
    assert "`/api/` answers 401" in readme()
