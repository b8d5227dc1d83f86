"""The admin under grants (issue 31): staff status lets a user in, then each queue's grants decide.

A staff user granted ``view`` on ``orders.*`` lists only those queues, gets a 404 for any other
(its name does not leak), sees no button for an action not granted, and has every crafted POST
refused with a 403, nothing changed. A user with ``consume`` pops; a superuser does everything.
The grant admin refuses bad grants with form errors, storing nothing; token pages take and show
a scope; every change made through the admin is audited. Every test that reads the store runs
on both engines.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from django_fdbqueue import schedules, service
from django_fdbqueue.access import events
from django_fdbqueue.models import QueueGrant, TokenScope

from .admin_helpers import make_user, text, url
from .admin_helpers import client_for  # noqa: F401 - fixture, found by name

pytestmark = pytest.mark.django_db

QUEUES = ("orders.eu", "orders.us", "billing.in")


def _kill(db, name: str) -> str:
    """A dead letter in ``name`` (a queue allowing one attempt, with nothing else ready)."""
    service.push(db, name, f"dead-{name}")
    lease = service.claim(db, name, lease=600)
    assert lease is not None and service.release(db, lease.receipt) == "dead"
    return lease.item.id


@pytest.fixture
def store(fdbqueue_db):
    """Three priority queues, each with one dead letter and two ready items."""
    for name in QUEUES:
        service.create_queue(fdbqueue_db, name, "priority", max_attempts=1)
        _kill(fdbqueue_db, name)
        service.push(fdbqueue_db, name, {"n": 1}, 1)
        service.push(fdbqueue_db, name, {"n": 2}, 2)
    return fdbqueue_db


def dead_id(db, name: str) -> str:
    return service.dead_letters(db, name, limit=10).items[0].item.id


def state(db) -> dict:
    """Everything an admin action could change, to compare before and after a refusal."""
    names = [info.name for info in service.list_queues(db, limit=100).items]
    return {
        name: (
            service.get_queue(db, name),
            [i.value for i in service.browse(db, name, limit=100).items],
            [d.item.id for d in service.dead_letters(db, name, limit=100).items],
        )
        for name in names
    }


def granted(django_user_model, username: str, actions: str, pattern: str = "orders.*"):
    user = make_user(django_user_model, username)
    QueueGrant.objects.create(user=user, pattern=pattern, actions=actions)
    return user


@pytest.fixture
def viewer(client_for, django_user_model):
    return client_for(granted(django_user_model, "viewer", "view"))


@pytest.fixture
def consumer(client_for, django_user_model):
    return client_for(granted(django_user_model, "consumer", "view,consume"))


@pytest.fixture
def root(client_for, django_user_model):
    return client_for(django_user_model.objects.create_superuser("root", password="pw-root"))


def listed(page: str) -> list[str]:
    return re.findall(r'class="field-name"><a href="[^"]+/([^/"]+)/change/">', page)


def actions_of(db, name: str) -> list[tuple[str, str, tuple]]:
    """Every mutating admin request on the queue ``name``: (method, page, path args, body)."""
    dead = dead_id(db, name)
    return [
        ("POST", "push", (name,), {"value": '"x"', "priority": "1"}),
        ("POST", "pop", (name,), {"end": "min"}),
        ("POST", "max_attempts", (name,), {"max_attempts": "9"}),
        ("GET", "clear", (name,), {}),
        ("POST", "clear", (name,), {"confirm": "True"}),
        ("POST", "dead_requeue", (name, dead), {}),
        ("GET", "dead_delete", (name, dead), {}),
        ("POST", "dead_delete", (name, dead), {"confirm": "True"}),
        ("GET", "delete", (name,), {}),
        ("POST", "delete", (name,), {"confirm": "True"}),
    ]


def send(client, method: str, page: str, args: tuple, body: dict):
    address = url(page, *args)
    return client.get(address) if method == "GET" else client.post(address, body)


# -- a view-only user ---------------------------------------------------------------------------


def test_a_view_only_user_lists_only_the_granted_queues_and_no_forms(viewer, store):
    page = text(viewer.get(url("changelist")))
    assert listed(page) == ["orders.eu", "orders.us"]
    assert 'id="create-queue"' not in page and "Add queue" not in page and 'class="fdbqueue-delete"' not in page
    assert "billing" not in page


def test_a_queue_outside_the_grants_is_a_404_for_every_page_and_action(viewer, store):
    before = state(store)
    pages = [
        ("GET", "change", ("billing.in",), {}),
        ("POST", "peek", ("billing.in",), {"end": "min"}),
        *actions_of(store, "billing.in"),
    ]
    for method, page, args, body in pages:
        response = send(viewer, method, page, args, body)
        assert response.status_code == 404, (method, page)
        assert "billing.in" not in text(response) or page == "change", page
    assert state(store) == before


def test_a_view_only_user_sees_no_button_of_an_action_not_granted(viewer, store):
    page = text(viewer.get(url("change", "orders.eu")))
    assert url("peek", "orders.eu") in page
    for absent in (
        'id="push-form"',
        'id="max-attempts-form"',
        url("pop", "orders.eu"),
        url("clear", "orders.eu"),
        url("delete", "orders.eu"),
    ):
        assert absent not in page, absent
    dead = text(viewer.get(url("change", "orders.eu"), {"view": "dead"}))
    assert 'class="fdbqueue-dead"' in dead and "/requeue/" not in dead and 'class="deletelink' not in dead


def test_a_view_only_user_s_crafted_posts_are_refused_and_change_nothing(viewer, store):
    before = state(store)
    for method, page, args, body in actions_of(store, "orders.eu"):
        assert send(viewer, method, page, args, body).status_code == 403, (method, page)
    response = viewer.post(url("add"), {"name": "orders.new", "kind": "fifo"})
    assert response.status_code == 403
    assert viewer.post(url("peek", "orders.eu"), {"end": "min"}).status_code == 302  # view allows peek
    assert state(store) == before


# -- a consumer, a manager, a superuser -----------------------------------------------------------


def test_a_consumer_pops_and_may_do_nothing_else(consumer, store):
    page = text(consumer.get(url("change", "orders.eu")))
    assert url("pop", "orders.eu") in page and "Pop max" in page
    assert 'id="push-form"' not in page and url("clear", "orders.eu") not in page
    assert consumer.post(url("pop", "orders.eu"), {"end": "max"}).status_code == 302
    assert [item.value for item in service.browse(store, "orders.eu").items] == [{"n": 1}]
    assert consumer.post(url("pop", "billing.in"), {"end": "max"}).status_code == 404
    before = state(store)
    for method, page, args, body in actions_of(store, "orders.eu")[2:]:  # everything but push and pop
        assert send(consumer, method, page, args, body).status_code == 403, (method, page)
    assert consumer.post(url("push", "orders.eu"), {"value": '"x"', "priority": "1"}).status_code == 403
    assert state(store) == before


def test_a_manager_creates_only_under_their_pattern(client_for, django_user_model, store):
    manager = client_for(granted(django_user_model, "manager", "view,manage"))
    assert 'id="create-queue"' in text(manager.get(url("changelist")))
    refused = manager.post(url("add"), {"name": "billing.new", "kind": "fifo"})
    assert refused.status_code == 403 and "You may not create a queue named" in text(refused)
    assert not service.queue_exists(store, "billing.new")
    assert manager.post(url("add"), {"name": "orders.new", "kind": "fifo"}).status_code == 302
    assert service.queue_exists(store, "orders.new")


def test_a_superuser_sees_and_may_do_everything(root, store):
    listing = text(root.get(url("changelist")))
    assert listed(listing) == ["billing.in", "orders.eu", "orders.us"]
    assert 'id="create-queue"' in listing and listing.count('class="fdbqueue-delete"') == 3
    page = text(root.get(url("change", "billing.in")))
    for shown in (
        'id="push-form"',
        'id="max-attempts-form"',
        url("pop", "billing.in"),
        url("clear", "billing.in"),
        url("delete", "billing.in"),
    ):
        assert shown in page, shown
    assert reverse("admin:fdbqueue_queuegrant_changelist") in text(root.get(reverse("admin:index")))


def test_the_activity_shows_only_the_viewable_queues(viewer, store):
    data = viewer.get(url("activity_data")).json()
    assert sorted(data["queues"]) == ["orders.eu", "orders.us"]
    assert viewer.get(url("activity_data"), {"queue": "orders.eu"}).status_code == 200
    hidden = viewer.get(url("activity_data"), {"queue": "billing.in"})
    assert hidden.status_code == 404 and hidden.json()["code"] == "queue_not_found"
    page = text(viewer.get(url("activity")))
    assert "billing.in" not in page and "orders.eu" in page


def test_schedules_follow_their_target_queue(client_for, django_user_model, store):
    schedules.create(
        store, "eu-tick", target={"kind": "push", "queue": "orders.eu", "value": 1, "priority": 0}, interval=60
    )
    schedules.create(
        store, "billing-tick", target={"kind": "push", "queue": "billing.in", "value": 1, "priority": 0}, interval=60
    )
    manager_user = granted(django_user_model, "manager", "view,manage")
    manager = client_for(manager_user)
    page = text(manager.get(url("schedules")))
    assert 'data-name="eu-tick"' in page and "billing-tick" not in page
    assert manager.post(url("schedule_action", "billing-tick"), {"action": "pause"}).status_code == 404
    assert manager.get(url("schedule_edit", "billing-tick")).status_code == 404
    form = {
        "name": "sneak",
        "kind": "push",
        "queue": "billing.in",
        "value": "1",
        "priority": "0",
        "interval": "60",
        "tz": "UTC",
        "catch_up": "last",
    }
    response = manager.post(url("schedules"), form)
    assert response.status_code == 403 and "You may not manage the queue" in text(response)
    assert [s.name for s in schedules.list_schedules(store)] == ["billing-tick", "eu-tick"]
    assert not schedules.get(store, "billing-tick").paused

    viewer = client_for(granted(django_user_model, "viewer", "view"))  # the same client, logged in anew
    page = text(viewer.get(url("schedules")))
    assert 'data-name="eu-tick"' in page and 'value="pause"' not in page
    assert viewer.post(url("schedule_action", "eu-tick"), {"action": "pause"}).status_code == 403
    assert not schedules.get(store, "eu-tick").paused
    manager = client_for(manager_user)
    assert manager.post(url("schedule_action", "eu-tick"), {"action": "pause"}).status_code == 302
    assert schedules.get(store, "eu-tick").paused


# -- the grant admin --------------------------------------------------------------------------------


def grant_form(**fields) -> dict:
    return {"user": "", "group": "", "pattern": "orders.*", "actions": ["view"], **fields}


def test_bad_grants_are_form_errors_and_nothing_is_stored(root, django_user_model):
    someone = make_user(django_user_model, "someone")
    team = Group.objects.create(name="team")
    add = reverse("admin:fdbqueue_queuegrant_add")
    bad = {
        "a star inside": grant_form(user=someone.pk, pattern="orders*"),
        "an empty pattern": grant_form(user=someone.pk, pattern=""),
        "a space": grant_form(user=someone.pk, pattern="or ders"),
        "no action": grant_form(user=someone.pk, actions=[]),
        "an unknown action": grant_form(user=someone.pk, actions=["view", "own"]),
        "nobody": grant_form(),
        "both": grant_form(user=someone.pk, group=team.pk),
    }
    for why, form in bad.items():
        response = root.post(add, form)
        assert response.status_code == 200 and "errornote" in text(response), why
    assert not QueueGrant.objects.exists()

    assert root.post(add, grant_form(group=team.pk, actions=["consume", "view"])).status_code == 302
    stored = QueueGrant.objects.get()
    assert (stored.group, stored.pattern, stored.actions, stored.created_by.username) == (
        team,
        "orders.*",
        "view,consume",
        "root",
    )
    listing = text(root.get(reverse("admin:fdbqueue_queuegrant_changelist")))
    assert "orders.*" in listing and "view,consume" in listing and "team" in listing


def test_only_superusers_and_the_change_permission_edit_grants(client_for, django_user_model):
    changelist, add = reverse("admin:fdbqueue_queuegrant_changelist"), reverse("admin:fdbqueue_queuegrant_add")
    plain = client_for(make_user(django_user_model, "plain", perms=("view_queue",)))
    assert plain.get(changelist).status_code == 403
    looker = make_user(django_user_model, "looker")
    looker.user_permissions.add(Permission.objects.get(codename="view_queuegrant"))
    assert client_for(looker).get(changelist).status_code == 200
    assert client_for(looker).get(add).status_code == 403
    editor = make_user(django_user_model, "editor")
    editor.user_permissions.add(Permission.objects.get(codename="change_queuegrant"))
    client = client_for(editor)
    assert client.post(add, grant_form(user=editor.pk)).status_code == 302
    assert QueueGrant.objects.filter(user=editor).exists()


# -- token scopes -----------------------------------------------------------------------------------


def test_a_token_is_created_with_a_scope_and_listed_with_it(root, django_user_model):
    make_user(django_user_model, "producer", staff=False)
    response = root.post(
        url("token_create"),
        {"username": "producer", "lifetime": "1", "scope": "push:orders.*\n\n view,consume : jobs \n"},
    )
    assert response.status_code == 400  # " view,consume " with spaces around the colon is no pattern
    assert not TokenScope.objects.exists()
    response = root.post(
        url("token_create"), {"username": "producer", "lifetime": "1", "scope": "push:orders.*\nconsume,view:jobs\n"}
    )
    assert response.status_code == 200
    assert re.sub(r"<[^>]+>", "", text(response).split('id="token-scope">', 1)[1].split("</span>", 1)[0]) == (
        "push:orders.*, view,consume:jobs"
    )
    assert TokenScope.objects.get().rules == ["push:orders.*", "view,consume:jobs"]
    listing = text(root.get(url("tokens")))
    assert "<code>push:orders.*</code><br><code>view,consume:jobs</code>" in listing


@pytest.mark.parametrize("scope", ["push", "fly:orders.*", "push:orders*", ":jobs"])
def test_a_malformed_scope_is_a_form_error_and_no_token_is_created(root, django_user_model, scope):
    from knox.models import AuthToken

    make_user(django_user_model, "producer", staff=False)
    response = root.post(url("token_create"), {"username": "producer", "lifetime": "1", "scope": scope})
    assert response.status_code == 400 and "Malformed scope" in text(response)
    assert not AuthToken.objects.exists() and not TokenScope.objects.exists()


# -- audit ------------------------------------------------------------------------------------------


@pytest.fixture
def audited():
    """The access actions of the audit records emitted meanwhile (what the audit counter counts)."""
    seen: list[str] = []

    def listen(event: str, action: str) -> None:
        if event == events.AUDITED:
            seen.append(action)

    events.add_listener(listen)
    yield seen
    events.remove_listener(listen)


def logged() -> list[tuple[str, str, str]]:
    """(object, access action, operation) of every admin log entry, oldest first."""
    rows = []
    for entry in LogEntry.objects.order_by("id"):
        body = json.loads(entry.change_message)
        rows.append((entry.object_repr, body["action"], body["detail"]["operation"]))
    return rows


def test_every_admin_change_is_audited(root, store, audited, django_user_model):
    root.post(url("add"), {"name": "orders.new", "kind": "fifo"})
    root.post(url("max_attempts", "orders.eu"), {"max_attempts": "5"})
    root.post(url("dead_requeue", "orders.eu", dead_id(store, "orders.eu")))
    root.post(url("dead_delete", "orders.us", dead_id(store, "orders.us")), {"confirm": "True"})
    root.post(url("clear", "orders.eu"), {"confirm": "True"})
    root.post(url("delete", "billing.in"), {"confirm": "True"})
    root.post(
        url("schedules"),
        {
            "name": "tick",
            "kind": "push",
            "queue": "orders.eu",
            "value": "1",
            "priority": "0",
            "interval": "60",
            "tz": "UTC",
            "catch_up": "last",
        },
    )
    root.post(url("schedule_action", "tick"), {"action": "delete"})
    someone = make_user(django_user_model, "someone")
    root.post(reverse("admin:fdbqueue_queuegrant_add"), grant_form(user=someone.pk))
    grant = QueueGrant.objects.get()
    root.post(reverse("admin:fdbqueue_queuegrant_delete", args=[grant.pk]), {"post": "yes"})
    created = root.post(url("token_create"), {"username": "someone", "lifetime": "1", "scope": "push:orders.*"})
    prefix = re.search(r"its prefix is <code>([^<]+)</code>", text(created)).group(1)
    root.post(url("token_revoke", prefix), {"confirm": "True"})
    assert logged() == [
        ("orders.new", "manage", "create"),
        ("orders.eu", "manage", "settings"),
        ("orders.eu", "manage", "requeue_dead_letter"),
        ("orders.us", "manage", "delete_dead_letter"),
        ("orders.eu", "manage", "clear"),
        ("billing.in", "delete", "destroy"),
        ("orders.eu", "manage", "create"),
        ("orders.eu", "manage", "destroy"),
        ("orders.*", "manage", "create"),
        ("orders.*", "manage", "destroy"),
        (prefix, "manage", "create"),
        (prefix, "manage", "destroy"),
    ]
    assert audited == [action for _, action, _ in logged()]
    entry = LogEntry.objects.order_by("id").first()
    assert entry.user.username == "root" and json.loads(entry.change_message)["remote_addr"] == "127.0.0.1"
    assert not QueueGrant.objects.exists() and not service.queue_exists(store, "billing.in")


# -- refusals are counted ---------------------------------------------------------------------------


@pytest.fixture
def refusals():
    """The access actions of the refusals emitted meanwhile (what the refusals counter counts)."""
    seen: list[str] = []

    def listen(event: str, action: str) -> None:
        if event == events.REFUSED:
            seen.append(action)

    events.add_listener(listen)
    yield seen
    events.remove_listener(listen)


SCHEDULE_FORM = {
    "name": "tick",
    "kind": "push",
    "queue": "orders.eu",
    "value": "1",
    "priority": "0",
    "interval": "60",
    "tz": "UTC",
    "catch_up": "last",
}


@pytest.mark.parametrize(
    ("grant", "method", "page", "body", "action"),
    [
        (None, "GET", "changelist", None, "view"),
        ("view", "GET", "add", None, "manage"),
        ("view", "POST", "add", {"name": "orders.new", "kind": "fifo"}, "manage"),
        (None, "GET", "schedules", None, "view"),
        ("view", "POST", "schedules", SCHEDULE_FORM, "manage"),
        (None, "GET", "activity", None, "view"),
        (None, "GET", "activity_data", None, "view"),
        (None, "GET", "tasks", None, "view"),
    ],
)
def test_a_refused_page_not_about_one_queue_is_counted(
    client_for, django_user_model, store, refusals, grant, method, page, body, action
):
    """Issue 36: these pages refused with a 403 without counting it; per-queue pages counted."""
    user = granted(django_user_model, "narrow", grant) if grant else make_user(django_user_model, "narrow")
    client = client_for(user)
    response = client.get(url(page)) if method == "GET" else client.post(url(page), body)
    assert response.status_code == 403
    assert refusals == [action]


def test_the_queue_list_s_page_links_name_no_hidden_queue(viewer, store, monkeypatch):
    """Issue 36: a page that read its most catalog pages linked to the next with a cursor naming
    the last queue read, hidden or not (catalog pages of one queue here, as of fifty in use)."""
    import base64
    from urllib.parse import unquote

    from django_fdbqueue.access import listing
    from django_fdbqueue.admin import queues as queue_pages

    monkeypatch.setattr(queue_pages, "QUEUES_PER_PAGE", 1)
    monkeypatch.setattr(listing, "LIST_READ_SIZE", 1)
    monkeypatch.setattr(listing, "LIST_READS", 2)
    for name in ("p.hidden1", "p.hidden2", "p.hidden3"):
        service.create_queue(store, name, "fifo")
    shown, cursors, address = [], [], url("changelist")
    for _ in range(10):
        page = text(viewer.get(address))
        shown += listed(page)
        found = re.search(r'<a href="([^"]*cursor=([^"&]+)[^"]*)" class="fdbqueue-page" rel="next">', page)
        if found is None:
            break
        address, cursor = found.group(1).replace("&amp;", "&"), unquote(found.group(2))
        cursors.append(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    assert shown == ["orders.eu", "orders.us"] and len(cursors) >= 2
    assert not [c for c in cursors if b"hidden" in c or b"billing" in c], cursors


def test_adding_a_schedule_under_a_hidden_schedule_s_name_does_not_say_it_exists(
    client_for, django_user_model, store, refusals
):
    """Issue 36: the form answered "already exists." for a schedule whose page is a 404."""
    schedules.create(store, "payroll-export", {"kind": "push", "queue": "billing.in", "value": 1}, interval=60)
    schedules.create(store, "tick", {"kind": "push", "queue": "orders.us", "value": 1}, interval=60)
    client = client_for(granted(django_user_model, "manager", "view,manage"))
    hidden = client.post(url("schedules"), {**SCHEDULE_FORM, "name": "payroll-export"})
    assert hidden.status_code == 403
    assert "already exists" not in text(hidden) and "You may not create a schedule named" in text(hidden)
    assert refusals == ["manage"]
    shown = client.post(url("schedules"), {**SCHEDULE_FORM, "name": "tick"})
    assert shown.status_code == 400 and "already exists" in text(shown)
    assert schedules.get(store, "payroll-export").target["queue"] == "billing.in"


def test_a_grant_s_edit_is_audited_with_its_values_before_and_after(root, django_user_model):
    """Issue 36: an edit recorded only the grant's new values, so the log could not say what changed."""
    someone = make_user(django_user_model, "someone")
    grant = QueueGrant.objects.create(user=someone, pattern="orders.*", actions="view")
    change = reverse("admin:fdbqueue_queuegrant_change", args=[grant.pk])
    response = root.post(change, grant_form(user=someone.pk, pattern="billing.*", actions=["view", "push"]))
    assert response.status_code == 302, text(response)[:500]
    detail = json.loads(LogEntry.objects.get().change_message)["detail"]
    assert detail["operation"] == "update"
    assert (detail["pattern"], detail["actions"]) == ("billing.*", "view,push")
    assert detail["before"] == {"pattern": "orders.*", "actions": "view", "user": "someone", "group": None}


def test_pushes_and_pops_in_the_admin_are_not_audited(consumer, store, audited):
    """Traffic is not audited on any face (the permissions guide's one statement of it)."""
    size = service.size(store, "orders.eu")
    assert consumer.post(url("pop", "orders.eu"), {"end": "min"}).status_code in (200, 302)
    assert service.size(store, "orders.eu") == size - 1
    assert audited == [] and not LogEntry.objects.exists()
