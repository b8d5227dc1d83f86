"""The real browser of the admin browser tests: Debian's Chromium driven by Playwright.

Shared by test_admin_browser.py and test_admin_browser_leases.py so both launch the same browser,
log in as the same user and save screenshots the same way. Import the fixtures by name into a
test module to use them there.

Playwright's own browser download is not used: the tests launch the system's Chromium. Without
it they are skipped, except under CI (``CI=true``), where a missing browser is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission

# Playwright's sync API keeps an event loop running in this thread; the ORM calls that the tests
# (and pytest-django's teardown) make from it are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Debian's Chromium; FDBQUEUE_TEST_CHROMIUM names another binary.
CHROMIUM = os.environ.get("FDBQUEUE_TEST_CHROMIUM") or "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
PASSWORD = "browser-test-password"


def _unavailable(reason: str) -> None:
    """Skip when the browser cannot run here; under CI that is a failure, not a skip."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}: CI must run the browser tests")
    pytest.skip(reason)


@pytest.fixture
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"no Chromium at {CHROMIUM} (install Debian's `chromium` package)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the `playwright` Python package is not installed")
    with sync_playwright() as playwright:
        # Each launch gets a fresh, empty profile directory of its own.
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def operator(django_user_model):
    """A staff user with every queue permission, who logs in with PASSWORD."""
    user = django_user_model.objects.create_user("operator", password=PASSWORD, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="fdbqueue"))
    return user


def open_page(browser: Any) -> tuple[Any, Any, list[str]]:
    """A new desktop-sized page whose waits are bounded; its JavaScript errors collect in the list
    returned with it (and its context, for the test to close)."""
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    return context, page, errors


def log_in(page: Any, address: str, username: str = "operator") -> None:
    """Go to ``address``, which shows the admin's login form, and submit it as ``username`` (whose
    password is PASSWORD)."""
    page.goto(address)
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def shoot(page, name: str) -> None:
    """Save a full-page screenshot at desktop width and at phone width."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(DESKTOP)
