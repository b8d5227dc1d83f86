"""A dead letter requeued from the admin in a real browser (Debian's Chromium through Playwright).

The queue and its dead letter are made through the service; a user logs in, opens the queue's
dead-letter tab, presses "Requeue", and sees the item back among the ready items. Every wait is
one of Playwright's bounded waits (``expect`` and ``wait_for_*``), never a sleep. Screenshots of
the dead-letter and leased/delayed tabs, at desktop and phone widths, go to
``artifacts/screenshots/`` (git-ignored). Without the browser the test is skipped, except under
CI (``CI=true``), as in ``test_admin_browser.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from django_fdbqueue import service

# See test_admin_browser.py: Playwright's sync API keeps an event loop running in this thread.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("FDBQUEUE_TEST_CHROMIUM") or "/usr/bin/chromium"
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
SCREENSHOTS = Path(__file__).resolve().parent.parent / "artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
PASSWORD = "browser-test-password"


def _unavailable(reason: str) -> None:
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


@pytest.fixture
def dead_letter(fdbqueue_db):
    """A FIFO queue allowing one attempt, whose only item was claimed, released, and so died."""
    service.create_queue(fdbqueue_db, "invoices", "fifo", max_attempts=1)
    service.enqueue(fdbqueue_db, "invoices", {"invoice": 17})
    lease = service.claim(fdbqueue_db, "invoices", lease=600)
    assert service.release(fdbqueue_db, lease.receipt) == "dead"
    # Something to see on the other tab: one leased and one delayed item.
    service.enqueue(fdbqueue_db, "invoices", {"invoice": 18})
    assert service.claim(fdbqueue_db, "invoices", lease=600) is not None
    service.enqueue(fdbqueue_db, "invoices", {"invoice": 19}, delay=3600)
    return lease.item.id


def test_requeueing_a_dead_letter_in_the_browser(fdbqueue_db, live_server, operator, browser, dead_letter):
    from playwright.sync_api import expect

    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    page.goto(live_server.url + reverse("admin:login"))
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))

    page.goto(live_server.url + reverse("admin:fdbqueue_queue_change", args=("invoices",)))
    expect(page.locator("#stat-dead")).to_have_text("1")
    expect(page.locator("#stat-max-attempts")).to_have_text("1")
    page.get_by_role("link", name="Dead letters (1)").click()
    page.wait_for_url(re.compile(r"\?view=dead$"))

    row = page.locator(f'tr.fdbqueue-dead[data-item-id="{dead_letter}"]')
    expect(row).to_have_count(1)
    expect(row.locator("td.field-attempts")).to_have_text("1")
    expect(row.locator("pre.fdbqueue-value")).to_have_text('{\n  "invoice": 17\n}')
    shoot(page, "queue-dead-letters")

    row.get_by_role("button", name="Requeue").click()
    expect(page.locator("ul.messagelist li.success")).to_contain_text("Requeued the dead letter")
    expect(page.locator("tr.fdbqueue-dead")).to_have_count(0)
    expect(page.locator("#stat-dead")).to_have_text("0")
    expect(page.locator("#stat-size")).to_have_text("1")
    expect(page.locator("ul.messagelist li.success")).to_contain_text('"invoice": 17')

    page.get_by_role("link", name="Ready items (1)").click()
    expect(page.locator("tr.fdbqueue-item pre.fdbqueue-value")).to_have_text(['{\n  "invoice": 17\n}'])
    expect(page.locator("tr.fdbqueue-item td.field-attempts")).to_have_text(["0"])

    page.get_by_role("link", name="Leased and delayed (2)").click()
    expect(page.locator("tr.fdbqueue-scheduled td.field-state")).to_have_text(["leased", "delayed"])
    shoot(page, "queue-scheduled")
    assert not errors, errors

    info = service.get_queue(fdbqueue_db, "invoices")
    assert (info.size, info.dead) == (1, 0)
    assert [item.id for item in service.browse(fdbqueue_db, "invoices").items] == [dead_letter]
    for name in ("queue-dead-letters", "queue-scheduled"):
        for label in ("desktop", "phone"):
            assert (SCREENSHOTS / f"{name}-{label}.png").stat().st_size > 0
    context.close()
