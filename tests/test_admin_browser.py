"""The admin's queue pages in a real browser: Debian's Chromium driven by Playwright.

A user logs in, creates a priority queue, pushes three items, sees them in priority order, pops
the max end, and checks what the page then shows. A value carrying a ``<script>`` is shown as
text and never runs. Screenshots of the list and the queue page, at desktop and phone widths,
are saved under ``artifacts/screenshots/`` (git-ignored) for a person to look at.

Playwright's own browser download is not used: the test launches the system's Chromium. Without
it the test is skipped, except under CI (``CI=true``), where a missing browser is a failure.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from django_fdbqueue import service

# Playwright's sync API keeps an event loop running in this thread; the ORM calls that the test
# (and pytest-django's teardown) make from it are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

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
    user = django_user_model.objects.create_user("operator", password=PASSWORD, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="fdbqueue"))
    return user


def shoot(page, name: str) -> None:
    """Save a full-page screenshot at desktop width and at phone width."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(size)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(DESKTOP)


def test_operating_a_queue_in_the_browser(fdbqueue_db, live_server, operator, browser):
    from playwright.sync_api import expect

    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    # Log in through the admin's own form, then find the queues from the admin index.
    page.goto(live_server.url + reverse("admin:index"))
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.get_by_role("link", name="Queues", exact=True).click()
    page.wait_for_url(re.compile(r"/admin/fdbqueue/queue/$"))
    assert page.locator("div.breadcrumbs").inner_text().startswith("Home")

    # Create a priority queue with the form on the list page.
    page.fill("#create-queue input[name=name]", "render-jobs")
    page.select_option("#create-queue select[name=kind]", "priority")
    page.click("#create-queue input[type=submit]")
    page.wait_for_url(re.compile(r"/render-jobs/change/$"))
    assert "was created" in page.locator("ul.messagelist").inner_text()

    # Push three items with different priorities.
    for value, priority in (('{"job": "thumbnail"}', "5"), ('{"job": "backup"}', "-2"), ('{"job": "alert"}', "90")):
        page.fill("#push-form textarea[name=value]", value)
        page.fill("#push-form input[name=priority]", priority)
        page.click("#push-form input[type=submit]")
        page.wait_for_selector("ul.messagelist li.success")
    # expect() retries until the page shows it: a click only waits for the navigation to start.
    expect(page.locator("tr.fdbqueue-item td.field-priority")).to_have_text(["-2", "5", "90"])
    values = page.locator("tr.fdbqueue-item pre.fdbqueue-value").all_inner_texts()
    assert values[0] == '{\n  "job": "backup"\n}'

    # The max end toggle reverses the order.
    page.get_by_role("link", name="max end", exact=True).click()
    expect(page.locator("tr.fdbqueue-item td.field-priority")).to_have_text(["90", "5", "-2"])

    # Bad input is refused in place.
    page.fill("#push-form textarea[name=value]", "{oops")
    page.click("#push-form input[type=submit]")
    assert "Enter valid JSON" in page.locator("#push-form .errorlist").inner_text()
    assert page.locator("#stat-size").inner_text() == "3"

    # Pop the max end: the highest priority item leaves.
    page.get_by_role("button", name="Pop max").click()
    page.wait_for_selector("ul.messagelist li.success")
    expect(page.locator("ul.messagelist")).to_contain_text("priority 90")
    expect(page.locator("tr.fdbqueue-item td.field-priority")).to_have_text(["-2", "5"])
    assert page.locator("#stat-size").inner_text() == "2"
    assert page.locator("#stat-popped").inner_text() == "1"
    assert page.locator("#stat-max").inner_text() == "5"

    # A value carrying a script is shown as text and never runs.
    hostile = "<script>window.__pwned = true; document.title = 'pwned';</script>"
    page.fill("#push-form textarea[name=value]", '"' + hostile.replace('"', '\\"') + '"')
    page.fill("#push-form input[name=priority]", "0")
    page.click("#push-form input[type=submit]")
    page.wait_for_selector("ul.messagelist li.success")
    page.reload()
    assert page.evaluate("window.__pwned") is None
    assert page.title() != "pwned"
    assert page.get_by_text(hostile, exact=False).count() >= 1
    page.get_by_role("button", name="Peek min").click()
    page.wait_for_selector("ul.messagelist li.success")
    assert page.evaluate("window.__pwned") is None
    assert page.title() != "pwned"
    assert not dialogs and not errors, (dialogs, errors)
    assert service.size(fdbqueue_db, "render-jobs") == 3

    shoot(page, "queue")
    page.goto(live_server.url + reverse("admin:fdbqueue_queue_changelist"))
    expect(page.locator("#result_list th.field-name")).to_have_text(["render-jobs"])
    shoot(page, "queue-list")
    for name in ("queue", "queue-list"):
        for label in ("desktop", "phone"):
            assert (SCREENSHOTS / f"{name}-{label}.png").stat().st_size > 0
    context.close()
