"""The REST API under WSGI and ASGI (issue 30, item 3): the same answers, and waits on the loop.

Each test runs over both transports and both engines: ``wsgi`` is Django's test ``Client`` (the
WSGI handler), ``asgi`` its ``AsyncClient`` (the ASGI handler), driven with ``async_to_sync`` from
the test's thread, so the views' database work runs on that thread and sees the test's rows.
Under ASGI the waiting pop and claim await the async service: they park on the queue's shared
watch (``parked``), skip the WSGI wait budget, and a cancelled request gives its item back.
``FdbQueueASGIHandler`` (``django_fdbqueue.asgi``) is driven with raw ASGI messages: its
requests share a fixed set of threads, and a disconnect cancels the wait on every Django version.
Every wait is bounded; tests synchronize on the parked waiters, never on sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import threading
from typing import Any, Awaitable, Callable

import pytest
from asgiref.sync import async_to_sync
from django.core.cache import cache
from django.db import connections
from django.test import AsyncClient, Client
from django.urls import resolve
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle

from django_fdbqueue import fdbapi, service
from django_fdbqueue.api import waitbudget
from django_fdbqueue.api.asyncviews import Deferred
from django_fdbqueue.api.views import QueueViewSet
from django_fdbqueue.asgi import FdbQueueASGIHandler
from django_fdbqueue.connection import get_database
from django_fdbqueue.models import QueueGrant
from django_fdbqueue.service._internals import offload

from .api_helpers import assert_empty_204, assert_error, poll, queue_url
from .api_helpers import user  # noqa: F401 - fixture, found by name
from .test_service_async import DEADLINE, parked, until

pytestmark = pytest.mark.django_db

TRANSPORTS = ("wsgi", "asgi")
PASSWORD = "wonderland"  # the api_helpers user's
#: A waiter's wait: far longer than any test needs, so only a push (or a cancel) ends it.
LONG_WAIT = 15


def basic(username: str, password: str = PASSWORD) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


class Transport:
    """One way into the API with one interface: ``call(method, path, body, auth)`` returns the
    response; ``run(scenario)`` runs an async scenario (ASGI) or None (WSGI has no loop to share)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.client = Client() if kind == "wsgi" else AsyncClient()

    def call(self, method: str, path: str, body: dict | None = None, auth: str | None = None) -> Any:
        kwargs: dict[str, Any] = {"headers": {"Authorization": auth}} if auth else {}
        args = (path, body) if body is not None else (path,)
        if body is not None:
            kwargs["content_type"] = "application/json"
        send = getattr(self.client, method)
        if self.kind == "wsgi":
            return send(*args, **kwargs)

        async def sent() -> Any:  # Django 4.2's AsyncClient methods are not marked as coroutine functions
            return await send(*args, **kwargs)

        return async_to_sync(sent)()


@pytest.fixture(params=TRANSPORTS)
def transport(request, fdbqueue_db, user) -> Transport:  # noqa: F811 - the user fixture
    cache.clear()  # the throttles count in the cache
    return Transport(request.param)


@pytest.fixture
def queue(fdbqueue_db) -> str:
    service.create_queue(fdbqueue_db, "q")
    return "q"


def claim_body(wait: float, lease: float = 60) -> dict:
    return {"wait": wait, "lease": lease}


# ----------------------------------------------------------------------------- the waiting routes


@pytest.fixture
def open_api(settings, fdbqueue_db) -> Any:
    """Anonymous callers may do everything: the threads a test starts (a WSGI waiter, the ASGI
    handler's lanes) never need the test's rows, which only the test's own thread sees. Returns
    the database handle (a changed FDBQUEUE reopens it, on the same store)."""
    settings.FDBQUEUE = {
        **settings.FDBQUEUE,
        "PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
        "ACCESS": "authenticated",
    }
    return get_database()


def wait_then_push(transport: Transport, db: Any, send: Callable[[], Any], value: Any) -> Any:
    """Send a long poll, push ``value`` once it waits, and return its answer.

    Under ASGI the request parks on the loop (the test sees it in the queue's channel); under
    WSGI it holds a thread, inside the wait budget (the test sees the budget's count).
    """
    if transport.kind == "asgi":

        async def scenario() -> Any:
            task = asyncio.ensure_future(send())
            await until(lambda: parked("q") == 1, "the request to park on the loop")
            await service.apush(db, "q", value)
            return await asyncio.wait_for(task, DEADLINE)

        return async_to_sync(scenario)()
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(send()), daemon=True)
    thread.start()
    poll(lambda: waitbudget.budget.active == 1, "the request to take its place in the wait budget")
    service.push(db, "q", value)
    thread.join(DEADLINE)
    assert not thread.is_alive() and answers, "the long poll did not answer"
    return answers[0]


def long_poll(transport: Transport, route: str, wait: float) -> Callable[[], Any]:
    """The request (anonymous: see ``open_api``), as a callable: a coroutine function under ASGI."""
    client = transport.client
    if route == "claim":
        path, body = queue_url("q", "claim"), claim_body(wait)
        return lambda: client.post(path, body, content_type="application/json")
    return lambda: client.post(queue_url("q", "pop") + f"?wait={wait:g}")


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_a_long_poll_waits_for_the_item_pushed_after_it(transport, queue, open_api, route):
    response = wait_then_push(transport, open_api, long_poll(transport, route, LONG_WAIT), "late")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["item"]["value"] if route == "claim" else body["value"]) == "late"
    info = service.get_queue(open_api, "q")
    assert (info.size, info.leased) == ((0, 1) if route == "claim" else (0, 0))
    assert waitbudget.budget.active == 0


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_a_long_poll_that_nothing_reaches_is_an_empty_204_without_retry_after(transport, queue, route):
    response = transport.call(
        "post",
        queue_url("q", route) + ("" if route == "claim" else "?wait=0.2"),
        claim_body(0.2) if route == "claim" else None,
        basic("alice"),
    )
    assert_empty_204(response)
    assert "Retry-After" not in response


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_wait_zero_answers_the_visible_item_at_once(transport, fdbqueue_db, queue, route):
    service.push(fdbqueue_db, "q", "ready")
    body = claim_body(0) if route == "claim" else None
    response = transport.call("post", queue_url("q", route), body, basic("alice"))
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"


def test_under_asgi_a_wait_skips_the_wsgi_wait_budget(transport, queue, open_api, settings):
    """Budget 0: WSGI refuses every wait (204 with Retry-After); ASGI waits, holding no thread."""
    settings.FDBQUEUE = {**settings.FDBQUEUE, "WAIT_BUDGET": 0}
    db = get_database()
    send = long_poll(transport, "claim", LONG_WAIT)
    if transport.kind == "wsgi":
        response = send()
        assert_empty_204(response)
        assert response["Retry-After"] == str(waitbudget.RETRY_AFTER_SECONDS)
        return
    response = wait_then_push(transport, db, send, "waited")
    assert response.status_code == 200 and response.json()["item"]["value"] == "waited"


def test_a_queue_deleted_during_the_wait_is_the_same_json_404(transport, queue, open_api):
    send = long_poll(transport, "claim", LONG_WAIT)
    if transport.kind == "asgi":

        async def scenario() -> Any:
            task = asyncio.ensure_future(send())
            await until(lambda: parked("q") == 1, "the claim to park")
            await asyncio.get_running_loop().run_in_executor(None, service.delete_queue, open_api, "q")
            return await asyncio.wait_for(task, DEADLINE)

        response = async_to_sync(scenario)()
    else:
        answers: list[Any] = []
        thread = threading.Thread(target=lambda: answers.append(send()), daemon=True)
        thread.start()
        poll(lambda: waitbudget.budget.active == 1, "the claim to wait")
        service.delete_queue(open_api, "q")
        thread.join(DEADLINE)
        response = answers[0]
    assert_error(response, 404, "queue_not_found")


def test_under_asgi_a_cancelled_long_poll_leaves_and_takes_nothing(fdbqueue_db, queue, user):  # noqa: F811
    """The view's task cancelled while parked (what a disconnect does): it leaves the channel, and an
    item pushed afterwards stays in the queue for others."""
    client = AsyncClient()

    async def scenario() -> None:
        task = asyncio.ensure_future(
            client.post(
                queue_url("q", "claim"),
                claim_body(LONG_WAIT),
                content_type="application/json",
                headers={"Authorization": basic("alice")},
            )
        )
        await until(lambda: parked("q") == 1, "the claim to park")
        task.cancel()
        await asyncio.wait({task}, timeout=DEADLINE)
        assert task.cancelled()
        await until(lambda: parked("q") == 0, "the cancelled claim to leave")

    async_to_sync(scenario)()
    service.push(fdbqueue_db, "q", "for someone else")
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.leased) == (1, 0)


# ----------------------------------------------------------------------------- the same policy


def test_the_waiting_routes_are_async_views_of_the_same_viewset():
    """What the schema generator reads (cls, actions) is the viewset's: the schema cannot differ."""
    for action in ("pop", "claim"):
        match = resolve(queue_url("q", action))
        assert asyncio.iscoroutinefunction(match.func)
        assert match.func.cls.__name__ == "QueueViewSet" and match.func.actions == {"post": action}
        assert match.func.csrf_exempt
    assert not asyncio.iscoroutinefunction(resolve(queue_url("q", "push")).func)


@pytest.mark.parametrize("route", ["claim", "pop", "push"])
def test_anonymous_is_refused_the_same_way(transport, queue, route):
    body = {"value": 1} if route == "push" else None
    response = transport.call("post", queue_url("q", route), body)
    assert_error(response, 403, "not_authenticated")


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_a_wrong_password_is_refused_the_same_way(transport, queue, route):
    response = transport.call("post", queue_url("q", route), None, basic("alice", "not-it"))
    assert_error(response, 403, "authentication_failed")


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_queue_grants_hide_or_refuse_the_same_way(transport, queue, route, django_user_model):
    django_user_model.objects.create_user("nobody", password=PASSWORD)
    viewer = django_user_model.objects.create_user("viewer", password=PASSWORD)
    QueueGrant.objects.create(user=viewer, pattern="q", actions="view")
    assert_error(transport.call("post", queue_url("q", route), None, basic("nobody")), 404, "queue_not_found")
    body = assert_error(transport.call("post", queue_url("q", route), None, basic("viewer")), 403, "permission_denied")
    assert "consume" in body["detail"]


@pytest.mark.parametrize(
    ("route", "body", "status", "code"),
    [
        ("claim", {"wait": 21}, 400, "invalid"),
        ("claim", {"lease": 0}, 400, "invalid"),
        ("claim", {"wiat": 1}, 400, "invalid"),
        ("pop?wait=21", None, 400, "invalid"),
        ("pop?end=middle", None, 400, "invalid"),
    ],
)
def test_bad_input_is_the_same_json_400(transport, queue, route, body, status, code):
    action, _, query = route.partition("?")
    response = transport.call("post", queue_url("q", action) + (f"?{query}" if query else ""), body, basic("alice"))
    assert_error(response, status, code)


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_a_missing_queue_and_a_bad_name_are_the_same_json_errors(transport, fdbqueue_db, route):
    body = {} if route == "claim" else None
    assert_error(transport.call("post", queue_url("nope", route), body, basic("alice")), 404, "queue_not_found")
    assert_error(transport.call("post", queue_url("~x", route), body, basic("alice")), 400, "invalid_queue_name")


def test_another_method_on_a_waiting_route_is_drfs_json_405(transport, queue):
    response = transport.call("get", queue_url("q", "claim"), None, basic("alice"))
    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "POST, OPTIONS"


class TwoPerMinute(UserRateThrottle):
    rate = "2/min"


def test_throttling_answers_429_the_same_way(transport, queue, monkeypatch):
    # DRF reads DEFAULT_THROTTLE_CLASSES into the view class once, at import: set the class's own.
    monkeypatch.setattr(QueueViewSet, "throttle_classes", [TwoPerMinute])
    for _ in range(2):
        assert transport.call("post", queue_url("q", "pop"), None, basic("alice")).status_code == 204
    response = assert_error_429(transport.call("post", queue_url("q", "claim"), {}, basic("alice")))
    assert int(response["Retry-After"]) >= 1


def assert_error_429(response: Any) -> Any:
    assert_error(response, 429, "throttled")
    return response


def test_the_answers_are_byte_for_byte_the_same(fdbqueue_db, queue, user, django_user_model):  # noqa: F811
    """The same requests through both handlers: status, content type, body and Allow/Vary alike."""
    django_user_model.objects.create_user("nobody", password=PASSWORD)
    requests = [
        ("post", queue_url("q", "claim"), {"wait": 21}, basic("alice")),
        ("post", queue_url("q", "claim"), {"wait": 0}, basic("alice")),
        ("post", queue_url("q", "pop") + "?wait=0.1", None, basic("alice")),
        ("post", queue_url("q", "pop"), None, None),
        ("post", queue_url("q", "pop"), None, basic("nobody")),
        ("post", queue_url("nope", "claim"), {}, basic("alice")),
        ("get", queue_url("q", "pop"), None, basic("alice")),
        ("options", queue_url("q", "claim"), None, basic("alice")),
    ]
    wsgi, asgi = Transport("wsgi"), Transport("asgi")
    for request in requests:
        one, other = wsgi.call(*request), asgi.call(*request)
        assert (one.status_code, one.content) == (other.status_code, other.content), request
        for header in ("Content-Type", "Allow", "Vary", "Retry-After", "WWW-Authenticate"):
            assert one.get(header) == other.get(header), (request, header)


def test_the_waiting_routes_work_with_atomic_requests(transport, fdbqueue_db, queue, monkeypatch):
    """ATOMIC_REQUESTS refuses async views (RuntimeError): the waiting routes are marked non-atomic."""
    monkeypatch.setitem(connections.settings["default"], "ATOMIC_REQUESTS", True)
    service.push(fdbqueue_db, "q", "x")
    response = transport.call("post", queue_url("q", "claim"), claim_body(0), basic("alice"))
    assert response.status_code == 200, response.content


def test_a_deferred_answer_is_never_sent_as_it_is():
    assert Deferred(None, None, None).status_code == 204  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- the ASGI handler


class Exchange:
    """One HTTP request driven through an ASGI app with raw messages; the client may disconnect."""

    def __init__(self, app: Any, method: str, path: str, body: bytes = b"") -> None:
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.sent: list[dict] = []
        self.inbox.put_nowait({"type": "http.request", "body": body, "more_body": False})
        path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [
                (b"host", b"testserver"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
        }
        self.task = asyncio.ensure_future(app(scope, self.inbox.get, self._send))

    async def _send(self, message: dict) -> None:
        self.sent.append(message)

    def disconnect(self) -> None:
        self.inbox.put_nowait({"type": "http.disconnect"})

    async def answer(self) -> tuple[int, bytes]:
        await asyncio.wait_for(self.task, DEADLINE)
        self.inbox.put_nowait({"type": "http.disconnect"})
        start = next(m for m in self.sent if m["type"] == "http.response.start")
        return start["status"], b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


def run_with_handler(scenario: Callable[[FdbQueueASGIHandler], Awaitable[Any]], lanes: int = 2) -> Any:
    """On a loop of its own, as a server runs it (under ``async_to_sync`` the test's thread would
    take every thread-sensitive call instead of the handler's lanes)."""
    return asyncio.run(scenario(FdbQueueASGIHandler(lanes)))


#: Threads an engine may start for its watches (the embedded engine's watcher, the client's network thread).
ENGINE_THREADS = 4


def test_the_handler_serves_many_parked_waiters_on_its_few_threads(queue, open_api):
    count = 40

    async def scenario(handler: FdbQueueASGIHandler) -> list[tuple[int, bytes]]:
        before = {t.ident for t in threading.enumerate()}
        waiters = [
            Exchange(handler, "POST", queue_url("q", "claim"), b'{"wait": 15, "lease": 60}') for _ in range(count)
        ]
        await until(lambda: parked("q") == count, "every claim to park")
        # Django's own handler keeps a thread per request until it ends: 30 here. Ours: its lanes,
        # and the async service's pool (both bounded), whatever the number of waiters.
        grown = [t.name for t in threading.enumerate() if t.ident not in before]
        assert len(grown) <= handler.lanes.count + offload.POOL_THREADS + ENGINE_THREADS < count, grown
        await service.apush_many(open_api, "q", list(range(count)))
        return [await waiter.answer() for waiter in waiters]

    answers = run_with_handler(scenario)
    assert [status for status, _ in answers] == [200] * count
    values = sorted(json.loads(body)["item"]["value"] for _, body in answers)
    assert values == list(range(count))  # each waiter exactly one, none twice


def test_the_handler_cancels_a_wait_whose_client_disconnects(queue, open_api):
    """On Django 5 the handler's own disconnect listener does it, on 4.2 ours: the wait ends at
    once, and an item pushed afterwards is not taken by a request nobody will read."""

    async def scenario(handler: FdbQueueASGIHandler) -> None:
        gone = Exchange(handler, "POST", queue_url("q", "claim"), b'{"wait": 15, "lease": 600}')
        await until(lambda: parked("q") == 1, "the claim to park")
        gone.disconnect()
        await asyncio.wait({gone.task}, timeout=DEADLINE)
        assert gone.task.done() and not any(m["type"] == "http.response.start" for m in gone.sent)
        assert parked("q") == 0

    run_with_handler(scenario)
    service.push(open_api, "q", "for someone else")
    info = service.get_queue(open_api, "q")
    assert (info.size, info.leased) == (1, 0)


def waiting_request(route: str, lease: float = 600) -> tuple[str, bytes]:
    """A pop or claim that takes the visible item at once (its lease far longer than the test)."""
    if route == "claim":
        return queue_url("q", "claim"), json.dumps({"wait": LONG_WAIT, "lease": lease}).encode()
    return queue_url("q", "pop") + f"?wait={LONG_WAIT}", b""


#: The tasks in which Django's handler makes and sends the response: ``process_request`` on Django
#: 5, the whole ``handle`` (which the app's handler cancels itself) on Django 4.2.
RESPONDING = ("ASGIHandler.handle.<locals>.process_request", "ASGIHandler.handle")


def responding() -> bool:
    """Is a task of the running loop still making a response (see RESPONDING)?"""
    return any(not task.done() and task.get_coro().__qualname__ in RESPONDING for task in asyncio.all_tasks())


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_the_handler_gives_back_what_a_client_left_while_its_answer_was_rendered(queue, open_api, route, monkeypatch):
    """The service has answered, and the view has returned its answer; the client disconnects while
    it is rendered on the lane (before it is sent). The item goes back to the queue (the lease is
    released), as for a client that left while the service's transaction ran."""
    rendering, rendered = threading.Event(), threading.Event()
    render = Response.render

    def held_render(self: Response) -> Any:  # on the request's lane, as Django renders it
        rendering.set()
        rendered.wait(DEADLINE)
        return render(self)

    monkeypatch.setattr(Response, "render", held_render)
    service.push(open_api, "q", "precious")

    async def scenario(handler: FdbQueueASGIHandler) -> None:
        gone = Exchange(handler, "POST", *waiting_request(route))
        try:
            await until(rendering.is_set, "the answer to be rendered")
            gone.disconnect()
            # The handler drops the response at once; it ends once the lane is free again.
            await until(lambda: not responding(), "the handler to drop the response")
        finally:
            rendered.set()
        await asyncio.wait({gone.task}, timeout=DEADLINE)
        assert gone.task.done() and not any(m["type"] == "http.response.start" for m in gone.sent)

    run_with_handler(scenario)
    assert offload.undos_settled(DEADLINE)
    info = service.get_queue(open_api, "q")
    assert (info.size, info.leased) == (1, 0)
    item = service.peek(open_api, "q")
    assert item is not None and item.value == "precious" and item.attempts == 0


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_the_handler_gives_back_nothing_it_sent(queue, open_api, route):
    """An answer whose last body message went to the server is the client's: nothing comes back."""
    service.push(open_api, "q", "delivered")

    async def scenario(handler: FdbQueueASGIHandler) -> tuple[int, bytes]:
        return await Exchange(handler, "POST", *waiting_request(route)).answer()

    status, body = run_with_handler(scenario)
    assert status == 200 and b"delivered" in body
    assert offload.undos_settled(DEADLINE)
    info = service.get_queue(open_api, "q")
    assert (info.size, info.leased) == ((0, 1) if route == "claim" else (0, 0))


@pytest.mark.parametrize("route", ["claim", "pop"])
def test_a_long_poll_whose_attempt_times_out_waits_on_instead_of_answering_503(
    engine_name, queue, open_api, route, settings
):
    """The store too busy to commit within TIMEOUT (here another connection holds SQLite's write
    lock; under load, 1,000 long polls and two worker processes) times a waiter's attempt out
    (1031). With its wait still ahead, the waiter tries again and gets the item: before, it
    answered 503 (8 of 1,258 claims in a load run)."""
    if engine_name != "embedded":
        pytest.skip("holding the store's write lock from outside is the embedded engine's")
    settings.FDBQUEUE = {**settings.FDBQUEUE, "TIMEOUT": 0.3}
    db = get_database()
    service.push(db, "q", "worth the wait")
    timed_out = fdbapi.retry_counts().get(1031, 0)
    holder = sqlite3.connect(db.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")

    async def scenario(handler: FdbQueueASGIHandler) -> tuple[int, bytes]:
        try:
            waiter = Exchange(handler, "POST", *waiting_request(route))
            await until(lambda: fdbapi.retry_counts().get(1031, 0) > timed_out, "an attempt to time out")
        finally:
            holder.execute("ROLLBACK")
        return await waiter.answer()

    try:
        status, body = run_with_handler(scenario)
    finally:
        holder.close()
    assert status == 200, body
    answer = json.loads(body)
    assert (answer["item"]["value"] if route == "claim" else answer["value"]) == "worth the wait"


def test_a_long_poll_that_times_out_until_its_wait_is_over_is_still_a_503(engine_name, queue, open_api, settings):
    """Tried again only while the wait lasts: a store locked for the whole wait answers as before."""
    if engine_name != "embedded":
        pytest.skip("holding the store's write lock from outside is the embedded engine's")
    settings.FDBQUEUE = {**settings.FDBQUEUE, "TIMEOUT": 0.2}
    db = get_database()
    service.push(db, "q", "out of reach")
    holder = sqlite3.connect(db.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")

    async def scenario(handler: FdbQueueASGIHandler) -> tuple[int, bytes]:
        return await Exchange(handler, "POST", queue_url("q", "claim"), b'{"wait": 1, "lease": 60}').answer()

    try:
        status, body = run_with_handler(scenario)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert status == 503 and json.loads(body)["code"] == "database_unavailable", body


def test_the_handler_answers_other_routes_as_django_does(queue, open_api):
    async def scenario(handler: FdbQueueASGIHandler) -> tuple[int, bytes]:
        return await Exchange(handler, "GET", queue_url("q")).answer()

    status, body = run_with_handler(scenario)
    assert status == 200 and b'"name":"q"' in body


def test_the_handler_refuses_other_protocols_and_bad_lane_counts():
    with pytest.raises(ValueError, match="at least 1"):
        FdbQueueASGIHandler(0)
    with pytest.raises(ValueError, match="websocket"):
        asyncio.run(FdbQueueASGIHandler()({"type": "websocket"}, None, None))
