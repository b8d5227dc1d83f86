"""The app's entries on the admin index and in its sidebar: Tasks, Schedules, Activity and API
tokens beside Queues, each shown only to the users its page lets in (``admin/entries.py``); knox's
own "Auth tokens" entry is gone. Every test runs per engine."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from django_fdbqueue import service

from .admin_helpers import make_user, text, url
from .admin_helpers import client_for  # noqa: F401 - fixture, found by name

pytestmark = pytest.mark.django_db

#: Entry model name -> (the name the index shows, the page it leads to).
ENTRIES = {
    "tasksentry": ("Tasks", "tasks"),
    "schedulesentry": ("Schedules", "schedules"),
    "activityentry": ("Activity", "activity"),
    "tokensentry": ("API tokens", "tokens"),
}
QUEUE_PAGES = {"tasksentry", "schedulesentry", "activityentry"}


def entry_url(model: str) -> str:
    return reverse(f"admin:fdbqueue_{model}_changelist")


def links(html: str) -> dict[str, str]:
    """Entry model -> the name its link shows, for the entries linked in ``html``."""
    found = {}
    for model in ENTRIES:
        match = re.search(rf'<a href="{re.escape(entry_url(model))}"[^>]*>([^<]+)</a>', html)
        if match:
            found[model] = match.group(1).strip()
    return found


def sidebar(html: str) -> str:
    return html.split('id="nav-sidebar"', 1)[1].split("</nav>", 1)[0]


def user_with(django_user_model, username: str, queue_perms=(), knox_perms=()):
    user = make_user(django_user_model, username, perms=queue_perms)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="knox", codename__in=knox_perms))
    return user


def test_the_index_and_the_sidebar_list_the_apps_pages(client_for, django_user_model, fdbqueue_db):
    client = client_for(user_with(django_user_model, "staff", ["view_queue"], ["view_authtoken"]))
    expected = {model: name for model, (name, _) in ENTRIES.items()}
    assert links(text(client.get(reverse("admin:index")))) == expected
    assert links(sidebar(text(client.get(url("changelist"))))) == expected
    for model, (_, page) in ENTRIES.items():
        response = client.get(entry_url(model))
        assert response.status_code == 302 and response["Location"] == url(page), model
        assert client.get(response["Location"]).status_code == 200, model


def test_knox_auth_tokens_entry_is_gone_and_its_addresses_still_lead_to_the_token_pages(
    client_for, django_user_model, fdbqueue_db
):
    client = client_for(user_with(django_user_model, "staff", ["view_queue"], ["view_authtoken"]))
    index = text(client.get(reverse("admin:index")))
    knox_list = reverse("admin:knox_authtoken_changelist")
    assert ">Auth tokens<" not in index and f'href="{knox_list}"' not in index
    assert index.count(">API tokens<") == 1
    assert client.get(knox_list)["Location"] == url("tokens")


@pytest.mark.parametrize(
    ("queue_perms", "knox_perms", "shown"),
    [
        ((), (), set()),
        (("view_queue",), (), QUEUE_PAGES),
        (("view_queue", "manage_queue"), (), QUEUE_PAGES),
        (("push_queue", "consume_queue"), (), set()),  # acting without viewing shows no page
        ((), ("view_authtoken",), {"tokensentry"}),
        ((), ("add_authtoken",), set()),
    ],
    ids=["no-permission", "view-queues", "manage-queues", "push-consume-only", "view-tokens", "add-tokens-only"],
)
def test_an_entry_is_shown_to_and_reaches_only_the_users_its_page_lets_in(
    client_for, django_user_model, fdbqueue_db, queue_perms, knox_perms, shown
):
    client = client_for(user_with(django_user_model, "someone", queue_perms, knox_perms))
    index = text(client.get(reverse("admin:index")))
    assert set(links(index)) == shown
    if not shown:
        assert "FDB queues" not in index
    for model in ENTRIES:
        response = client.get(entry_url(model), follow=True)
        assert response.status_code == (200 if model in shown else 403), model


def test_anonymous_visitors_of_an_entry_go_to_the_login(client, fdbqueue_db):
    for model in ENTRIES:
        response = client.get(entry_url(model))
        assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login")), model


def test_the_activity_pages_queue_links_are_separate(client_for, django_user_model, fdbqueue_db):
    for name in ("alpha", "beta", "gamma"):
        service.create_queue(fdbqueue_db, name)
        service.push(fdbqueue_db, name, {"n": 1})
    page = text(client_for(make_user(django_user_model, "viewer", perms=["view_queue"])).get(url("activity")))
    listing = page.split('class="fdbqueue-activity-queues">', 1)[1].split("</ul>", 1)[0]
    words = re.sub(r"<[^>]+>", "", listing).split()
    assert words == ["alpha", "beta", "gamma"], listing
