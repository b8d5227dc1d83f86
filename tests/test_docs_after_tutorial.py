"""The how-to guides' ``# settings.py`` blocks, pasted after the tutorial's, as its readers do.

The snippet runner adds a page's settings blocks to a fresh ``startproject`` settings module; a
reader who did the tutorial first adds them to the tutorial's. Then a block that adds an app the
tutorial already added lists it twice, and Django refuses to start ("Application labels aren't
unique"). Here every guide's settings blocks run, in page order, after the tutorial's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.doc_blocks import REPO, marked_blocks
from tests.docsnippets import project

TUTORIAL = REPO / "docs" / "tutorial.md"
SETTINGS_BLOCK = re.compile(r"^```python\n(# settings\.py\n.*?)^```", re.S | re.M)
GUIDES = sorted(
    page for page in (REPO / "docs" / "howto").glob("*.md") if SETTINGS_BLOCK.search(page.read_text("utf-8"))
)


def tutorial_settings() -> list[str]:
    blocks = marked_blocks(TUTORIAL, "tutorial-test").values()
    return [block.body for block in blocks if block.language == "python" and block.body.startswith("# settings.py")]


def test_the_tutorial_and_the_guides_have_settings_blocks():
    assert len(tutorial_settings()) >= 2
    assert REPO / "docs" / "howto" / "tasks.md" in GUIDES


@pytest.mark.parametrize("guide", GUIDES, ids=lambda page: page.name)
def test_a_guide_s_settings_paste_after_the_tutorial_s(guide: Path, tmp_path):
    namespace = project.settings_namespace(tmp_path)
    for body in tutorial_settings():
        exec(compile(body, str(TUTORIAL), "exec"), namespace)
    for body in SETTINGS_BLOCK.findall(guide.read_text("utf-8")):
        exec(compile(body, str(guide), "exec"), namespace)
    apps = list(namespace["INSTALLED_APPS"])
    assert sorted({app for app in apps if apps.count(app) > 1}) == [], f"{guide.name} lists an app twice"
