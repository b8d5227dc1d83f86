"""Who gets in, and what leaks out: the API and the admin pages against anonymous users, bad
credentials, forged requests, other people's receipts and provoked failures.

The demo's REST_FRAMEWORK settings (knox tokens first, then session, then basic) are read from
demo_project/demo/settings.py and put on the API's viewset for the tests that need tokens: the
test project keeps DRF's session and basic authentication, and DRF binds a view's classes when it
is imported, so overriding the setting would not reach the viewset.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.test import Client
from django.urls import URLPattern, reverse
from django.utils import timezone
from django.utils.module_loading import import_string
from knox.models import AuthToken
from rest_framework.routers import APIRootView
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from django_fdbqueue import connection, service
from django_fdbqueue.api.urls import router
from django_fdbqueue.fdbapi import make_error
from django_fdbqueue.models import Queue
from django_fdbqueue.service import extension
from django_fdbqueue.tokens import service as tokens

from .api_helpers import grant_everything, poll

pytestmark = pytest.mark.django_db

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_DIR = REPO_ROOT / "demo_project"
SHORT_LEASE = 0.2  # seconds; a lease meant to run out during the test
ALL_METHODS = ("get", "head", "post", "put", "patch", "delete", "options")
# What an error body must never hold, whatever went wrong.
LEAK_MARKERS = ("Traceback", 'File "/', '.py", line', "RuntimeError", "OSError")


# ----------------------------------------------------------------------------- helpers


def load_demo_settings(monkeypatch: pytest.MonkeyPatch, **environ: str) -> types.ModuleType:
    """The demo's settings module, executed afresh under the given DEMO_* environment."""
    for name in ("DEMO_THROTTLE", "DEMO_THROTTLE_USER", "DEMO_THROTTLE_ANON"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location(
        "fdbqueue_demo_settings_under_test", DEMO_DIR / "demo" / "settings.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def json_error(response, status: int | tuple[int, ...], code: str | None = None) -> dict:
    statuses = status if isinstance(status, tuple) else (status,)
    assert response.status_code in statuses, (response.status_code, response.content)
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert isinstance(body.get("detail"), str) and isinstance(body.get("code"), str), body
    if code is not None:
        assert body["code"] == code, body
    return body


def assert_no_leak(response, *secrets: str) -> None:
    """Neither the secrets given, nor the SECRET_KEY, nor any trace of a stack in the response."""
    text = response.content.decode("utf-8", "replace") + json.dumps(dict(response.headers))
    for secret in (django_settings.SECRET_KEY, *secrets):
        assert secret not in text, f"{secret!r} leaked into the response"
    for marker in LEAK_MARKERS:
        assert marker not in text, f"{marker!r} in the response: {text[:500]}"


# Values for every URL parameter of the API's and the admin's routes.
SAMPLE_KWARGS = {
    "name": "q",
    "item_id": "AAAAAAAAAAAAAAAAAAAAAAAA",
    "id": "0" * 32,
    "workflow_id": "0" * 32,
    "result_id": "0" * 32,
    "backend": "default",
    "queue_name": "default",
    "prefix": "0123456789abcde",
    "user_id": "1",
}


def api_viewsets() -> list[type]:
    """Every viewset the API's router mounts (queues, schedules, ...)."""
    return [viewset for _prefix, viewset, _basename in router.registry]


def use_on_every_viewset(monkeypatch, attribute: str, classes: list[type]) -> None:
    """Give every viewset of the API these classes, as DRF's defaults would in a project."""
    for viewset in api_viewsets():
        monkeypatch.setattr(viewset, attribute, classes)


def api_routes() -> list[str]:
    """A concrete address for every route of the API's router that is an operation (not the root)."""
    addresses = []
    for pattern in router.urls:
        if not getattr(pattern.callback, "actions", None):
            continue
        kwargs = {key: SAMPLE_KWARGS[key] for key in pattern.pattern.regex.groupindex}
        addresses.append(reverse(f"fdbqueue-api:{pattern.name}", kwargs=kwargs))
    return addresses


def admin_routes() -> list[str]:
    """A concrete address for every page of our admin (queues, tasks, tokens), plus knox's own."""
    patterns: list[URLPattern] = admin.site._registry[Queue].get_urls()
    addresses = [
        reverse(f"admin:{pattern.name}", kwargs={key: SAMPLE_KWARGS[key] for key in pattern.pattern.regex.groupindex})
        for pattern in patterns
    ]
    return addresses + [reverse("admin:knox_authtoken_changelist"), reverse("admin:knox_authtoken_add")]


@pytest.fixture
def demo_auth(monkeypatch) -> list[type]:
    """The API authenticates as the demo configures it: knox tokens, then session, then basic."""
    paths = load_demo_settings(monkeypatch).REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]
    classes = [import_string(path) for path in paths]
    use_on_every_viewset(monkeypatch, "authentication_classes", classes)
    return classes


@pytest.fixture
def alice(django_user_model):
    """A user of the shared queues: every action on every queue, through a grant."""
    user = django_user_model.objects.create_user("alice", password="pw-alice-7hG2")
    grant_everything(user)
    return user


@pytest.fixture
def mallory(django_user_model):
    """Another user of the same queues, with the same grant: receipts, not grants, keep leases apart."""
    user = django_user_model.objects.create_user("mallory", password="pw-mallory-4kQ9")
    grant_everything(user)
    return user


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


def with_token(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


# ============================================================================ the API refuses anonymous users


@pytest.mark.parametrize("configuration", ["test project: session, basic", "demo: knox, session, basic"])
def test_every_api_route_and_method_refuses_anonymous_users(fdbqueue_db, monkeypatch, configuration):
    service.create_queue(fdbqueue_db, "q")
    service.push(fdbqueue_db, "q", "kept")
    demo = configuration.startswith("demo")
    if demo:
        paths = load_demo_settings(monkeypatch).REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]
        use_on_every_viewset(monkeypatch, "authentication_classes", [import_string(path) for path in paths])
    client = APIClient()
    routes = api_routes()
    assert len(routes) >= 15, routes  # the walk found the router's routes
    let_in = []
    for address in routes:
        for method in ALL_METHODS:
            response = getattr(client, method)(address, {"name": "x", "value": 1}, format="json")
            if response.status_code not in (401, 403):
                let_in.append((method.upper(), address, response.status_code))
                continue
            # A token client is challenged to present one; after session authentication, a 403.
            assert response.status_code == (401 if demo else 403), (method, address)
            if demo:
                assert response["WWW-Authenticate"] == "Token"
            if method != "head":
                json_error(response, (401, 403), "not_authenticated")
    assert let_in == []
    assert [item.value for item in service.browse(fdbqueue_db, "q").items] == ["kept"]
    assert service.list_queues(fdbqueue_db).items[0].name == "q"


def test_the_api_root_refuses_anonymous_users(fdbqueue_db):
    json_error(APIClient().get("/api/"), (401, 403))


def test_the_api_root_refuses_anonymous_users_with_the_demos_drf_defaults(fdbqueue_db, monkeypatch):
    demo = load_demo_settings(monkeypatch).REST_FRAMEWORK
    classes = [import_string(path) for path in demo["DEFAULT_PERMISSION_CLASSES"]]
    monkeypatch.setattr(APIRootView, "permission_classes", classes)
    assert APIClient().get("/api/").status_code in (401, 403)


@pytest.mark.parametrize(
    "header",
    ["Token", "Token a b", "Token not-a-token-at-all", "Token " + "f" * 64, "Basic bm9ib2R5Om5vdGhpbmc=", "Basic %%%"],
)
def test_bad_credentials_are_a_json_401_on_every_route(fdbqueue_db, demo_auth, header):
    service.create_queue(fdbqueue_db, "q")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    for address in api_routes():
        response = client.post(address, {"value": 1}, format="json")
        json_error(response, 401, "authentication_failed")
        assert_no_leak(response, header.partition(" ")[2] or "\x00")
    assert service.size(fdbqueue_db, "q") == 0


# ============================================================================ tokens on the API


def test_a_valid_token_works_and_a_revoked_one_is_refused(fdbqueue_db, demo_auth, alice):
    record, token = tokens.create_token(alice)
    client = with_token(token)
    assert client.post("/api/queues/", {"name": "q"}, format="json").status_code == 201
    assert client.post("/api/queues/q/push/", {"value": "hi"}, format="json").status_code == 201
    lease = client.post("/api/queues/q/claim/", {"lease": 60}, format="json").json()
    assert client.post("/api/queues/q/ack/", {"receipt": lease["receipt"]}, format="json").status_code == 204

    tokens.revoke_token(record.prefix)
    response = client.get("/api/queues/")
    json_error(response, 401, "authentication_failed")
    assert_no_leak(response, token)


def test_an_expired_token_is_refused_and_knox_deletes_it(fdbqueue_db, demo_auth, alice):
    record, token = tokens.create_token(alice, expiry=datetime.timedelta(hours=1))
    assert with_token(token).get("/api/queues/").status_code == 200
    AuthToken.objects.filter(token_key=record.prefix).update(expiry=timezone.now() - datetime.timedelta(seconds=1))
    response = with_token(token).get("/api/queues/")
    json_error(response, 401, "authentication_failed")
    assert_no_leak(response, token)
    assert not AuthToken.objects.filter(token_key=record.prefix).exists()


def test_a_token_of_a_deactivated_user_is_refused(fdbqueue_db, demo_auth, alice):
    _, token = tokens.create_token(alice)
    alice.is_active = False
    alice.save()
    json_error(with_token(token).get("/api/queues/"), 401, "authentication_failed")


def test_session_requests_need_csrf_and_token_requests_carry_no_cookie_to_abuse(fdbqueue_db, demo_auth, alice):
    service.create_queue(fdbqueue_db, "q")
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)  # a real session cookie, as a logged-in browser has
    assert browser.get("/api/queues/").status_code == 200
    body = json_error(browser.post("/api/queues/q/push/", {"value": 1}, format="json"), 403, "permission_denied")
    assert "CSRF" in body["detail"]
    assert service.size(fdbqueue_db, "q") == 0

    _, token = tokens.create_token(alice)
    script = APIClient(enforce_csrf_checks=True)
    script.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert script.post("/api/queues/q/push/", {"value": 1}, format="json").status_code == 201


def test_the_schema_declares_the_token_scheme(demo_auth):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    scheme = schema["components"]["securitySchemes"]["knoxApiToken"]
    assert scheme["type"] == "apiKey" and scheme["in"] == "header" and scheme["name"] == "Authorization"
    assert "Token" in scheme.get("description", "")
    queue_paths = {path: operations for path, operations in schema["paths"].items() if path.startswith("/api/queues/")}
    assert len(queue_paths) >= 10
    for path, operations in queue_paths.items():
        for method, operation in operations.items():
            assert {"knoxApiToken": []} in operation["security"], (method, path)


def test_the_demo_serves_a_schema_with_the_token_scheme():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "DEMO_THROTTLE": "on"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--format", "openapi-json", "--skip-checks"],
        cwd=DEMO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    schemes = json.loads(result.stdout)["components"]["securitySchemes"]
    assert {"knoxApiToken", "cookieAuth", "basicAuth"} <= set(schemes)


# ============================================================================ demo settings and throttling


def test_the_demo_puts_tokens_first_and_keeps_basic_auth_last(monkeypatch):
    framework = load_demo_settings(monkeypatch).REST_FRAMEWORK
    assert framework["DEFAULT_AUTHENTICATION_CLASSES"] == [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ]
    assert framework["DEFAULT_PERMISSION_CLASSES"] == ["rest_framework.permissions.IsAuthenticated"]
    assert "knox" in load_demo_settings(monkeypatch).INSTALLED_APPS


def test_the_demo_throttles_by_default_and_can_be_tuned_or_switched_off(monkeypatch):
    framework = load_demo_settings(monkeypatch).REST_FRAMEWORK
    assert framework["DEFAULT_THROTTLE_CLASSES"] == [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ]
    for scope in ("user", "anon"):
        throttle = type("Probe", (SimpleRateThrottle,), {"rate": framework["DEFAULT_THROTTLE_RATES"][scope]})()
        assert throttle.num_requests >= 10 and throttle.duration >= 1
    tuned = load_demo_settings(monkeypatch, DEMO_THROTTLE_USER="50/s").REST_FRAMEWORK
    assert tuned["DEFAULT_THROTTLE_RATES"]["user"] == "50/s"
    off = load_demo_settings(monkeypatch, DEMO_THROTTLE="off").REST_FRAMEWORK
    assert "DEFAULT_THROTTLE_CLASSES" not in off


@pytest.fixture
def tight_throttle(monkeypatch):
    """The demo's throttle classes on the API, at 3 requests a minute per user or address."""
    paths = load_demo_settings(monkeypatch).REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]
    use_on_every_viewset(monkeypatch, "throttle_classes", [import_string(path) for path in paths])
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"user": "3/min", "anon": "3/min"})
    cache.clear()  # DRF counts requests in the default cache
    yield
    cache.clear()


def test_a_throttled_request_is_a_json_429_with_retry_after(fdbqueue_db, demo_auth, tight_throttle, alice, mallory):
    service.create_queue(fdbqueue_db, "q")
    _, token = tokens.create_token(alice)
    client = with_token(token)
    for _ in range(3):
        assert client.post("/api/queues/q/push/", {"value": 1}, format="json").status_code == 201
    response = client.post("/api/queues/q/push/", {"value": 1}, format="json")
    body = json_error(response, 429, "throttled")
    assert "throttled" in body["detail"].lower()
    assert 1 <= int(response["Retry-After"]) <= 60
    assert service.size(fdbqueue_db, "q") == 3  # the refused push stored nothing
    # The count is per user: someone else is not slowed down.
    assert client_for(mallory).get("/api/queues/q/").status_code == 200


def test_anonymous_requests_are_refused_before_any_throttle(fdbqueue_db, demo_auth, tight_throttle):
    # Authentication and permissions come before throttling in DRF: an anonymous client (or one
    # guessing tokens) gets 401 every time, never a 429 that would tell it anything.
    for _ in range(6):
        json_error(APIClient().get("/api/queues/"), 401)


# ============================================================================ receipts that are not yours


def claim(client: APIClient, name: str, lease: float) -> dict:
    response = client.post(f"/api/queues/{name}/claim/", {"lease": lease}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def settle(client: APIClient, name: str, action: str, receipt: str, **extra: Any):
    return client.post(f"/api/queues/{name}/{action}/", {"receipt": receipt, **extra}, format="json")


def counts(db, name: str) -> tuple[int, int, int, int]:
    info = service.get_queue(db, name)
    return info.size, info.leased, info.delayed, info.dead


def forged(receipt: str) -> str:
    """The same lease's address with a made-up secret: well formed, but not the lease's token."""
    parsed = extension.parse_receipt(receipt)
    fake = bytes(b ^ 0xFF for b in parsed.token)
    return extension.Receipt(parsed.name, parsed.queue_id, parsed.priority, parsed.stamp, fake).encode()


def test_a_forged_receipt_cannot_settle_someone_elses_lease(fdbqueue_db, alice, mallory):
    owner, thief = client_for(alice), client_for(mallory)
    service.create_queue(fdbqueue_db, "jobs")
    service.create_queue(fdbqueue_db, "other")
    service.push(fdbqueue_db, "jobs", {"job": 1})
    lease = claim(owner, "jobs", 60)
    before = counts(fdbqueue_db, "jobs")
    fake = forged(lease["receipt"])
    assert fake != lease["receipt"]
    for action, extra in (("ack", {}), ("release", {}), ("extend", {"seconds": 600})):
        json_error(settle(thief, "jobs", action, fake, **extra), 409, "lease_not_found")
        # The real receipt on another queue is not a receipt of that queue.
        json_error(settle(thief, "other", action, lease["receipt"], **extra), 400, "invalid_receipt")
    json_error(settle(thief, "jobs", "ack", "A" * 60), 400, "invalid_receipt")
    assert counts(fdbqueue_db, "jobs") == before == (0, 1, 0, 0)
    scheduled = service.scheduled(fdbqueue_db, "jobs").items
    assert scheduled[0].visible_at.isoformat().replace("+00:00", "Z") == lease["lease_expires_at"]
    # The owner's lease is untouched: its receipt still settles it.
    assert settle(owner, "jobs", "ack", lease["receipt"]).status_code == 204
    assert counts(fdbqueue_db, "jobs") == (0, 0, 0, 0)


def test_a_stolen_receipt_whose_lease_expired_and_was_claimed_again_is_worthless(fdbqueue_db, alice, mallory):
    first, second = client_for(alice), client_for(mallory)
    service.create_queue(fdbqueue_db, "jobs")
    item = service.push(fdbqueue_db, "jobs", {"job": 2})
    stolen = claim(first, "jobs", SHORT_LEASE)

    def claimed_again() -> dict | None:
        response = second.post("/api/queues/jobs/claim/", {"lease": 60}, format="json")
        assert response.status_code in (200, 204), response.content
        return response.json() if response.status_code == 200 else None

    current = poll(claimed_again, "the expired lease's item to be claimable again")
    assert current["item"]["id"] == item.id and current["item"]["attempts"] == 2
    before = counts(fdbqueue_db, "jobs")
    for client in (first, second):  # the thief, and even the current holder, cannot use the old receipt
        for action, extra in (("ack", {}), ("release", {"delay": 0}), ("extend", {"seconds": 600})):
            json_error(settle(client, "jobs", action, stolen["receipt"], **extra), 409, "lease_not_found")
    assert counts(fdbqueue_db, "jobs") == before == (0, 1, 0, 0)
    assert settle(second, "jobs", "ack", current["receipt"]).status_code == 204
    assert counts(fdbqueue_db, "jobs") == (0, 0, 0, 0)


# ============================================================================ nothing secret in error responses


@pytest.fixture
def cluster_secret(tmp_path) -> str:
    """A cluster file's content (description:ID@address): nothing a client should ever see."""
    content = "fdbprod:Zq9Xs3cr3tK3y@10.9.8.7:4500"
    (tmp_path / "fdb.cluster").write_text(content + "\n")
    return content


@pytest.mark.parametrize("debug", [False, True])
def test_a_500_carries_no_trace_and_no_secret(
    fdbqueue_db, demo_auth, alice, settings, monkeypatch, cluster_secret, debug
):
    settings.DEBUG = debug
    _, token = tokens.create_token(alice)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"bug with {django_settings.SECRET_KEY} and {cluster_secret} and {token}")

    monkeypatch.setattr(service, "list_queues", broken)
    monkeypatch.setattr(service, "push", broken)
    service.create_queue(fdbqueue_db, "q")
    client = with_token(token)
    for response in (client.get("/api/queues/"), client.post("/api/queues/q/push/", {"value": 1}, format="json")):
        body = json_error(response, 500, "server_error")
        assert body == {"detail": "Internal server error.", "code": "server_error"}
        assert_no_leak(response, cluster_secret, token, "bug with")


def test_a_store_that_cannot_be_opened_is_a_503_that_names_nothing(
    fdbqueue_db, alice, monkeypatch, cluster_secret, tmp_path
):
    client = client_for(alice)

    def refuse(queue_settings: Any) -> Any:
        raise OSError(f"cannot use cluster file {tmp_path / 'fdb.cluster'}: {cluster_secret}")

    connection.reset_database()
    monkeypatch.setattr(connection, "open_database", refuse)
    for response in (client.get("/api/queues/"), client.post("/api/queues/", {"name": "q"}, format="json")):
        body = json_error(response, 503, "database_unavailable")
        assert body["fdb_error"] is None and int(response["Retry-After"]) >= 1
        assert_no_leak(response, cluster_secret, str(tmp_path))
    monkeypatch.undo()
    connection.reset_database()


def test_a_corrupt_embedded_file_is_a_503_that_names_nothing(fdbqueue_db, alice, settings, tmp_path, cluster_secret):
    broken = tmp_path / "broken.sqlite3"
    broken.write_text(cluster_secret * 100)  # not an SQLite database
    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(broken)}
    connection.reset_database()
    try:
        response = client_for(alice).get("/api/queues/")
        json_error(response, 503, "database_unavailable")
        assert_no_leak(response, cluster_secret, str(tmp_path))
    finally:
        connection.reset_database()


def test_a_timed_out_store_is_a_503_with_only_the_error_number(fdbqueue_db, alice, monkeypatch):
    def timed_out(*args: Any, **kwargs: Any) -> Any:
        raise make_error(1031)

    monkeypatch.setattr(service, "list_queues", timed_out)
    response = client_for(alice).get("/api/queues/")
    body = json_error(response, 503, "database_unavailable")
    assert body["fdb_error"] == 1031 and response["Retry-After"] == "1"
    assert_no_leak(response)


def test_client_errors_do_not_echo_credentials(fdbqueue_db, demo_auth, alice):
    _, token = tokens.create_token(alice)
    client = with_token(token)
    responses = [
        client.get("/api/queues/missing/"),
        client.post("/api/queues/", {"name": "bad name!"}, format="json"),
        client.post("/api/queues/", b"{not json", content_type="application/json"),
    ]
    basic = APIClient()
    basic.credentials(HTTP_AUTHORIZATION="Basic YWxpY2U6d3JvbmctcGFzc3dvcmQ=")  # alice:wrong-password
    responses.append(basic.get("/api/queues/"))
    for response in responses:
        assert 400 <= response.status_code < 500
        assert_no_leak(response, token, "wrong-password", "pw-alice-7hG2")


def test_the_admins_failure_pages_name_nothing(client, django_user_model, fdbqueue_db, monkeypatch):
    root = django_user_model.objects.create_superuser("root", password="pw-root")
    client.force_login(root)

    def timed_out(*args: Any, **kwargs: Any) -> Any:
        raise make_error(1031)

    monkeypatch.setattr(service, "list_queues", timed_out)
    response = client.get(reverse("admin:fdbqueue_queue_changelist"))
    assert response.status_code == 503
    assert_no_leak(response)

    def store_down(*args: Any, **kwargs: Any) -> Any:
        raise tokens.TokenStoreError("could not connect to db.internal:5432 as user app with password hunter2")

    monkeypatch.setattr(tokens, "list_tokens", store_down)
    response = client.get(reverse("admin:fdbqueue_queue_tokens"))
    assert response.status_code == 503
    assert_no_leak(response, "hunter2", "db.internal")


# ============================================================================ the admin refuses non-staff; forms need CSRF


@pytest.fixture
def admin_state(fdbqueue_db, django_user_model):
    """A queue with an item and a user with a token: what a page reached by mistake could change."""
    service.create_queue(fdbqueue_db, "q")
    service.push(fdbqueue_db, "q", "kept")
    owner = django_user_model.objects.create_user("owner")
    tokens.create_token(owner)

    def unchanged() -> bool:
        return (
            [item.value for item in service.browse(fdbqueue_db, "q").items] == ["kept"]
            and [info.name for info in service.list_queues(fdbqueue_db).items] == ["q"]
            and AuthToken.objects.count() == 1
        )

    return unchanged


def test_every_admin_page_refuses_anonymous_and_non_staff_users(client, django_user_model, admin_state):
    member = django_user_model.objects.create_user("member", password="pw-member")
    member.user_permissions.set(Permission.objects.all())  # every permission, but not staff
    login = reverse("admin:login")
    routes = admin_routes()
    assert any("/tokens/" in route for route in routes) and any("/tasks/" in route for route in routes)
    for who in ("anonymous", "member"):
        if who == "member":
            client.force_login(member)
        for address in routes:
            for method in ("get", "post"):
                response = getattr(client, method)(
                    address, {"confirm": "True", "username": "owner", "value": "1", "lifetime": "never", "name": "new"}
                )
                assert response.status_code == 302, (who, method, address, response.status_code)
                assert response["Location"].startswith(login), (who, method, address)
    assert admin_state()


def test_every_admin_form_needs_the_csrf_token(django_user_model, admin_state):
    root = django_user_model.objects.create_superuser("root", password="pw-root")
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    for address in admin_routes():
        response = client.post(
            address,
            {"confirm": "True", "username": "owner", "lifetime": "never", "value": '"x"', "end": "min", "name": "new"},
        )
        assert response.status_code == 403, (address, response.status_code)
        assert b"CSRF" in response.content, address
    assert admin_state()
