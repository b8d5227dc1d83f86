"""Every REST route x every kind of caller x a granted and another queue: the status, and on refusal
nothing changed in the store.

Callers: anonymous, a user with no grant, a user granted one action (view, push, consume, manage,
delete) on ``orders.*``, a superuser, and a token scoped to ``push,view:orders.*`` of a user who may
do everything. Each route runs on a freshly seeded store (two queues, each with a ready, a leased
and a dead item, and one schedule), and the whole state is compared before and after a refusal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from django.contrib.admin.models import LogEntry
from knox.models import AuthToken
from rest_framework.test import APIClient

from django_fdbqueue import schedules, service
from django_fdbqueue.schedules.model import as_data
from django_fdbqueue.access import ACTIONS, events
from django_fdbqueue.exceptions import QueueNotFound, ScheduleNotFound
from django_fdbqueue.models import QueueGrant
from django_fdbqueue.tokens import service as tokens

from .api_helpers import grant_everything

pytestmark = pytest.mark.django_db

GRANTED, OTHER = "orders.eu", "other"
SCOPE = "push,view:orders.*"


@dataclass(frozen=True)
class Route:
    """One route: how to call it on a queue, the action it needs and its status when allowed."""

    name: str
    method: str
    path: str  # "{q}" is the queue; "{dead}" its dead letter's id
    action: str
    ok: int
    body: dict | None = field(default=None, hash=False)
    on_target: bool = False  # the schedules: the action on the schedule's target queue


QUEUE_ROUTES = [
    Route("retrieve", "get", "queues/{q}/", "view", 200),
    Route("peek", "get", "queues/{q}/peek/", "view", 200),
    Route("items", "get", "queues/{q}/items/", "view", 200),
    Route("scheduled", "get", "queues/{q}/scheduled/", "view", 200),
    Route("dead_letters", "get", "queues/{q}/dead-letters/", "view", 200),
    Route("key_limits", "get", "queues/{q}/key-limits/", "view", 200),
    Route("push", "post", "queues/{q}/push/", "push", 201, {"value": 9}),
    Route("pop", "post", "queues/{q}/pop/", "consume", 200),
    Route("claim", "post", "queues/{q}/claim/", "consume", 200, {"lease": 30}),
    Route("ack", "post", "queues/{q}/ack/", "consume", 204, {"receipt": "{receipt}"}),
    Route("release", "post", "queues/{q}/release/", "consume", 200, {"receipt": "{receipt}"}),
    Route("extend", "post", "queues/{q}/extend/", "consume", 200, {"receipt": "{receipt}", "lease": 60}),
    Route("create", "post", "queues/", "manage", 201, {"name": "{q}.new"}),
    Route("partial_update", "patch", "queues/{q}/", "manage", 200, {"max_attempts": 5}),
    Route("clear", "post", "queues/{q}/clear/", "manage", 204),
    Route("requeue_dead_letter", "post", "queues/{q}/dead-letters/{dead}/requeue/", "manage", 200),
    Route("delete_dead_letter", "delete", "queues/{q}/dead-letters/{dead}/", "manage", 204),
    Route("destroy", "delete", "queues/{q}/", "delete", 204),
]
SCHEDULE_TARGET = {"kind": "push", "queue": GRANTED, "value": 1}
SCHEDULE_ROUTES = [
    Route("schedules_list", "get", "schedules/", "view", 200, on_target=True),
    Route("schedules_retrieve", "get", "schedules/tick/", "view", 200, on_target=True),
    Route(
        "schedules_create",
        "post",
        "schedules/",
        "manage",
        201,
        {"name": "tock", "target": SCHEDULE_TARGET, "interval": 60},
        on_target=True,
    ),
    Route("schedules_update", "patch", "schedules/tick/", "manage", 200, {"interval": 120}, on_target=True),
    Route("schedules_destroy", "delete", "schedules/tick/", "manage", 204, on_target=True),
    Route("schedules_pause", "post", "schedules/tick/pause/", "manage", 200, on_target=True),
    Route("schedules_resume", "post", "schedules/tick/resume/", "manage", 200, on_target=True),
    Route("schedules_run_now", "post", "schedules/tick/run-now/", "manage", 200, on_target=True),
]
CALLERS = ["anonymous", "no grant", *ACTIONS, "superuser", "scoped token"]


def seed(db) -> dict[str, dict[str, str]]:
    """Both queues afresh, each with a ready, a leased and a dead item; the schedule "tick"."""
    handles = {}
    for name in (GRANTED, OTHER, f"{GRANTED}.new", f"{OTHER}.new"):
        try:
            service.delete_queue(db, name)
        except QueueNotFound:
            pass
    for name in (GRANTED, OTHER):
        service.create_queue(db, name, "fifo", max_attempts=1)
        for n in range(3):
            service.push(db, name, {"n": n})
        dead = service.claim(db, name, lease=600)
        service.release(db, dead.receipt)  # max_attempts 1: a dead letter now
        leased = service.claim(db, name, lease=600)
        handles[name] = {"receipt": leased.receipt, "dead": dead.item.id}
    try:
        schedules.delete(db, "tock")
    except ScheduleNotFound:
        pass
    schedules.create(db, "tick", SCHEDULE_TARGET, interval=3600) if not _has_tick(db) else None
    return handles


def _has_tick(db) -> bool:
    return any(s.name == "tick" for s in schedules.list_schedules(db))


def state(db) -> tuple:
    """Everything a route could change: the queues, their items, leases and dead letters, the schedules."""
    queues = service.list_queues(db, limit=100).items
    contents = {
        info.name: (
            [item.id for item in service.browse(db, info.name, limit=100).items],
            [(entry.item.id, entry.visible_at) for entry in service.scheduled(db, info.name, limit=100).items],
            [letter.item.id for letter in service.dead_letters(db, info.name, limit=100).items],
        )
        for info in queues
    }
    return queues, contents, [as_data(s) for s in schedules.list_schedules(db)]


def client_for(caller: str, django_user_model) -> APIClient:
    client = APIClient()
    if caller == "anonymous":
        return client
    if caller == "superuser":
        client.force_authenticate(django_user_model.objects.create_superuser("root"))
        return client
    user = django_user_model.objects.create_user(caller.replace(" ", "-"))
    if caller in ACTIONS:
        QueueGrant.objects.create(user=user, pattern="orders.*", actions=caller)
    if caller == "scoped token":
        grant_everything(user)
        record, _token = tokens.create_token(user, scope=[SCOPE])
        client.force_authenticate(user, token=AuthToken.objects.get(token_key=record.prefix))
        return client
    client.force_authenticate(user)
    return client


def rights(caller: str, queue: str) -> set[str]:
    """What the caller may do on the queue, by the rules the matrix checks."""
    if caller == "superuser":
        return set(ACTIONS)
    if queue != GRANTED:
        return set()
    return {caller} if caller in ACTIONS else {"push", "view"} if caller == "scoped token" else set()


def expected(caller: str, route: Route, queue: str) -> tuple[int, str | None]:
    """(status, error code) the route must answer. A schedule's queue is its target's: "tick"
    pushes into the granted queue; the list shows what the caller may view, so it is a 200."""
    if caller == "anonymous":  # 403, not 401: the test settings' first authentication is the session's
        return 403, "not_authenticated"
    granted = rights(caller, queue)
    if route.action in granted or route.name == "schedules_list":
        return route.ok, None
    if route.name in ("create", "schedules_create") or granted:
        return 403, "permission_denied"
    return 404, "schedule_not_found" if route.on_target else "queue_not_found"


def call(client: APIClient, route: Route, queue: str, handles: dict[str, str]):
    fill = {"q": queue, **handles}
    path = "/api/" + route.path.format(**fill)
    body = (
        json.loads(json.dumps(route.body).replace("{receipt}", handles["receipt"]).replace("{q}", queue))
        if route.body is not None
        else None
    )
    return getattr(client, route.method)(path, body, format="json")


def check(route: Route, caller: str, queue: str, response, db, before) -> list[str]:
    status, code = expected(caller, route, queue)
    where = f"{route.name} on {queue} as {caller}"
    problems = []
    if response.status_code != status:
        return [f"{where}: {response.status_code} (expected {status}): {response.content[:200]!r}"]
    if code is not None:
        body = response.json()
        if body.get("code") != code:
            problems.append(f"{where}: code {body.get('code')!r}, expected {code!r}")
        if code == "permission_denied" and body.get("action") != route.action:
            problems.append(f"{where}: action {body.get('action')!r}, expected {route.action!r}")
        if state(db) != before:
            problems.append(f"{where}: the refused request changed the store")
    return problems


@pytest.mark.parametrize("caller", CALLERS)
def test_every_route_answers_each_caller_as_its_grants_say(fdbqueue_db, django_user_model, caller):
    client = client_for(caller, django_user_model)
    problems = []
    for route in QUEUE_ROUTES + SCHEDULE_ROUTES:
        for queue in (GRANTED,) if route.on_target else (GRANTED, OTHER):
            handles = seed(fdbqueue_db)
            before = state(fdbqueue_db)
            response = call(client, route, queue, handles[queue])
            problems += check(route, caller, queue, response, fdbqueue_db, before)
    assert problems == []


@pytest.mark.parametrize("caller", CALLERS)
def test_the_list_shows_only_the_queues_the_caller_may_view(fdbqueue_db, django_user_model, caller):
    seed(fdbqueue_db)
    response = client_for(caller, django_user_model).get("/api/queues/")
    if caller == "anonymous":
        assert response.status_code == 403 and response.json()["code"] == "not_authenticated"
        return
    assert response.status_code == 200, response.content
    shown = [queue["name"] for queue in response.json()["results"]]
    assert shown == [name for name in (GRANTED, OTHER) if "view" in rights(caller, name)]


def test_a_not_found_for_a_hidden_queue_is_the_same_as_for_no_queue(fdbqueue_db, django_user_model):
    seed(fdbqueue_db)
    client = client_for("push", django_user_model)
    hidden, missing = client.get(f"/api/queues/{OTHER}/"), client.get("/api/queues/nothing-here/")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == {"detail": f"No queue is named {OTHER!r}.", "code": "queue_not_found"}
    assert missing.json() == {"detail": "No queue is named 'nothing-here'.", "code": "queue_not_found"}


def test_a_schedules_grant_on_every_queue_opens_the_schedules(fdbqueue_db, django_user_model):
    seed(fdbqueue_db)
    user = django_user_model.objects.create_user("scheduler")
    QueueGrant.objects.create(user=user, pattern="*", actions="view,manage")
    client = APIClient()
    client.force_authenticate(user)
    assert client.get("/api/schedules/").status_code == 200
    assert client.post("/api/schedules/tick/pause/").status_code == 200


def test_a_schedule_is_its_target_queues(fdbqueue_db, django_user_model):
    """The list shows the schedules into queues the user may view; moving one needs manage on both
    queues; a task target (any task queue) needs the action on every queue."""
    seed(fdbqueue_db)
    schedules.create(fdbqueue_db, "tock", {"kind": "push", "queue": OTHER, "value": 1}, interval=60)
    task = {"kind": "task", "task": "tests.task_functions.add", "kwargs": {}}
    user = django_user_model.objects.create_user("orders-manager")
    QueueGrant.objects.create(user=user, pattern="orders.*", actions="view,manage")
    client = APIClient()
    client.force_authenticate(user)
    assert [s["name"] for s in client.get("/api/schedules/").json()] == ["tick"]
    hidden = client.get("/api/schedules/tock/")
    assert (hidden.status_code, hidden.json()["code"]) == (404, "schedule_not_found")
    before = state(fdbqueue_db)
    moved = client.patch(
        "/api/schedules/tick/", {"target": {"kind": "push", "queue": OTHER, "value": 1}}, format="json"
    )
    assert (moved.status_code, moved.json()["code"]) == (403, "permission_denied")
    into_task = client.post("/api/schedules/", {"name": "tack", "target": task, "interval": 60}, format="json")
    assert (into_task.status_code, into_task.json()["code"]) == (403, "permission_denied")
    assert state(fdbqueue_db) == before
    schedules.delete(fdbqueue_db, "tock")


def test_access_authenticated_restores_the_old_behaviour(fdbqueue_db, django_user_model, settings):
    seed(fdbqueue_db)
    settings.FDBQUEUE = {**settings.FDBQUEUE, "ACCESS": "authenticated"}
    client = client_for("no grant", django_user_model)
    assert [q["name"] for q in client.get("/api/queues/").json()["results"]] == [GRANTED, OTHER]
    assert client.post(f"/api/queues/{OTHER}/push/", {"value": 1}, format="json").status_code == 201
    assert client.get("/api/schedules/").status_code == 200
    assert client.delete(f"/api/queues/{OTHER}/").status_code == 204


# ----------------------------------------------------------------------------- audit and counts


def test_changes_are_audited_with_who_what_and_where(fdbqueue_db, django_user_model):
    handles = seed(fdbqueue_db)
    client = client_for("manage", django_user_model)
    assert client.post(f"/api/queues/{GRANTED}/clear/", REMOTE_ADDR="192.0.2.7").status_code == 204
    path = f"/api/queues/{GRANTED}/dead-letters/{handles[GRANTED]['dead']}/"
    assert client.delete(path, REMOTE_ADDR="192.0.2.7").status_code == 204
    entries = list(LogEntry.objects.order_by("id"))
    assert [(e.user.username, e.object_repr) for e in entries] == [("manage", GRANTED)] * 2
    first, second = (json.loads(entry.change_message) for entry in entries)
    assert first["action"] == "manage" and first["remote_addr"] == "192.0.2.7"
    assert first["detail"]["operation"] == "clear"
    assert second["detail"]["item_id"] == handles[GRANTED]["dead"]


def test_refusals_and_reads_are_not_audited_but_refusals_are_counted(fdbqueue_db, django_user_model):
    seed(fdbqueue_db)
    heard = []
    events.add_listener(lambda event, action: heard.append((event, action)))
    try:
        client = client_for("view", django_user_model)
        assert client.get(f"/api/queues/{GRANTED}/").status_code == 200
        assert client.post(f"/api/queues/{GRANTED}/clear/").status_code == 403
        assert client.delete(f"/api/queues/{OTHER}/").status_code == 404
    finally:
        events._listeners.pop()
    assert heard == [("refused", "manage"), ("refused", "delete")]
    assert not LogEntry.objects.exists()


def test_the_metrics_need_view_on_every_queue(fdbqueue_db, django_user_model):
    pytest.importorskip("prometheus_client")
    seed(fdbqueue_db)
    client = client_for("view", django_user_model)  # view on orders.* only
    response = client.get("/metrics/")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    QueueGrant.objects.create(user=response.wsgi_request.user, pattern="*", actions="view")
    assert client.get("/metrics/").status_code == 200


def test_options_describes_a_route_to_anyone_signed_in_and_reads_no_queue(fdbqueue_db, django_user_model):
    """OPTIONS (DRF's metadata) says what a route takes, for any queue name, existing or not: it
    is neither refused nor a way to learn which queues exist; anonymous callers stay refused."""
    seed(fdbqueue_db)
    user = django_user_model.objects.create_user("nobody")
    client = APIClient()
    client.force_authenticate(user)
    for name in (OTHER, "no.such.queue"):
        response = client.options(f"/api/queues/{name}/")
        assert response.status_code == 200, response.content
        assert response.json()["name"]  # the route's description, the same for every name
    assert client.options(f"/api/queues/{OTHER}/").json() == client.options("/api/queues/no.such.queue/").json()
    assert APIClient().options(f"/api/queues/{OTHER}/").status_code == 403


def test_a_user_who_may_view_few_queues_among_many_gets_them_on_a_full_page(fdbqueue_db, django_user_model):
    """The list reads on past catalog pages of queues the user may not view: the visible ones come
    in full pages, never as a run of empty pages, and the cursor continues after the last shown."""
    for n in range(30):
        service.create_queue(fdbqueue_db, f"a.hidden.{n:02}")
    for n in range(5):
        service.create_queue(fdbqueue_db, f"b.shown.{n}")
    user = django_user_model.objects.create_user("few")
    QueueGrant.objects.create(user=user, pattern="b.*", actions="view")
    client = APIClient()
    client.force_authenticate(user)
    first = client.get("/api/queues/?limit=3").json()
    assert [queue["name"] for queue in first["results"]] == ["b.shown.0", "b.shown.1", "b.shown.2"]
    rest = client.get(first["next"]).json()
    assert [queue["name"] for queue in rest["results"]] == ["b.shown.3", "b.shown.4"] and rest["next"] is None
