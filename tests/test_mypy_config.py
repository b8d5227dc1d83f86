"""The type check covers the whole package with --strict, and nothing in it is let off (issue 32).

scripts/check-release runs mypy with ``[tool.mypy]`` of pyproject.toml; these tests keep that
configuration from quietly growing exceptions again: a per-module override may only say that a
third-party library ships no types.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _mypy_config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["tool"]["mypy"]


def test_the_whole_package_is_checked_strictly():
    config = _mypy_config()
    assert config["packages"] == ["django_fdbqueue"]
    assert config.get("strict") is True


def test_no_module_of_the_package_is_let_off():
    for override in _mypy_config().get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        assert not [name for name in modules if name.split(".")[0] == "django_fdbqueue"], override
        assert set(override) == {"module", "ignore_missing_imports"}, override
