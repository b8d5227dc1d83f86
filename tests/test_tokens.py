"""API tokens (django_fdbqueue.tokens, on django-rest-knox): the service's rules, the
``manage.py fdbqueue token`` subcommands and the admin's token pages.

Each test checks what is stored (knox's rows) and that a token created here is one knox accepts,
not only what was printed. How the REST API treats tokens (valid, revoked, expired) is in
test_security.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from contextlib import contextmanager
from typing import Iterator

import pytest
from django.conf import settings as django_settings
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.db import OperationalError, connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from knox.auth import TokenAuthentication
from knox.models import AuthToken
from rest_framework.exceptions import AuthenticationFailed

from django_fdbqueue.models import Queue
from django_fdbqueue.tokens import service as tokens

from .cli_helpers import Terminal, ok, run

pytestmark = pytest.mark.django_db

TOKEN_RE = re.compile(r"^[0-9a-f]{64}$")  # knox's default: 32 random bytes, hex
ISO_UTC = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"
SLACK = dt.timedelta(minutes=2)  # for expiry times computed "from now" on a slow machine


def authenticates(token: str):
    """The user knox finds for ``token``, or None when knox refuses it."""
    try:
        user, _ = TokenAuthentication().authenticate_credentials(token.encode())
    except AuthenticationFailed:
        return None
    return user


def near(moment: dt.datetime | str | None, expected: dt.datetime) -> bool:
    if isinstance(moment, str):
        moment = dt.datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return moment is not None and abs(moment - expected) < SLACK


@contextmanager
def knox_table_missing() -> Iterator[None]:
    """Every query on knox's table fails as it does before ``migrate`` has created it."""

    def refuse(execute, sql, params, many, context):
        if "knox_authtoken" in sql:
            raise OperationalError("no such table: knox_authtoken")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(refuse):
        yield


def without_knox():
    """The project's settings with knox left out of INSTALLED_APPS."""
    return override_settings(INSTALLED_APPS=[app for app in django_settings.INSTALLED_APPS if app != "knox"])


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob")


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", password="pw-root")


# ============================================================================ the service


def test_a_new_token_is_returned_once_and_only_its_hash_is_stored(alice):
    record, token = tokens.create_token(alice)
    assert TOKEN_RE.match(token)
    row = AuthToken.objects.get()
    assert row.token_key == record.prefix == token[:15]
    assert token not in row.digest and row.digest != token
    assert not any(token in str(value) for value in vars(record).values())
    assert authenticates(token) == alice
    assert authenticates(token[:-1] + ("0" if token[-1] != "0" else "1")) is None


def test_the_default_lifetime_is_the_projects_token_ttl(alice, settings):
    record, _ = tokens.create_token(alice)
    assert near(record.expiry, timezone.now() + dt.timedelta(hours=10))  # knox's own default
    settings.REST_KNOX = {"TOKEN_TTL": dt.timedelta(days=30)}
    record, _ = tokens.create_token(alice)
    assert near(record.expiry, timezone.now() + dt.timedelta(days=30))
    record, _ = tokens.create_token(alice, expiry=None)
    assert record.expiry is None and not record.is_expired()


@pytest.mark.parametrize(
    "expiry", [dt.timedelta(0), dt.timedelta(seconds=-1), tokens.MAX_EXPIRY + dt.timedelta(days=1), 30, "30"]
)
def test_a_lifetime_that_cannot_be_is_refused(alice, expiry):
    with pytest.raises(tokens.InvalidExpiry):
        tokens.create_token(alice, expiry=expiry)
    assert not AuthToken.objects.exists()


def test_inactive_users_get_no_token(alice):
    alice.is_active = False
    alice.save()
    with pytest.raises(tokens.UserNotAllowed, match="inactive"):
        tokens.create_token(alice)
    assert not AuthToken.objects.exists()


def test_only_a_superuser_creates_a_superusers_token(root, django_user_model):
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    with pytest.raises(tokens.UserNotAllowed, match="superuser"):
        tokens.create_token(root, created_by=staff)
    assert not AuthToken.objects.exists()
    _, token = tokens.create_token(root, created_by=root)
    assert authenticates(token) == root


def test_knox_token_limit_per_user_holds_and_expired_tokens_do_not_count(alice, bob, settings):
    settings.REST_KNOX = {"TOKEN_LIMIT_PER_USER": 1}
    first, _ = tokens.create_token(alice)
    with pytest.raises(tokens.TokenLimitReached, match="revoke one first"):
        tokens.create_token(alice)
    tokens.create_token(bob)  # the limit is per user
    AuthToken.objects.filter(token_key=first.prefix).update(expiry=timezone.now() - dt.timedelta(seconds=1))
    tokens.create_token(alice)
    assert AuthToken.objects.filter(user=alice).count() == 2


def test_listing_is_newest_first_and_filters_by_user(alice, bob):
    made = [tokens.create_token(user)[0] for user in (alice, bob, alice)]
    listed = tokens.list_tokens()
    assert [record.prefix for record in listed] == [record.prefix for record in reversed(made)]
    assert [record.username for record in tokens.list_tokens(alice)] == ["alice", "alice"]
    assert tokens.list_tokens(bob)[0].prefix == made[1].prefix


def test_revoking_by_prefix_by_whole_token_and_all_of_a_users(alice, bob):
    (a1, t1), (a2, t2), (b1, t3) = (tokens.create_token(user) for user in (alice, alice, bob))
    assert tokens.revoke_token(a1.prefix[:8]).prefix == a1.prefix
    assert authenticates(t1) is None and authenticates(t2) == alice
    assert tokens.revoke_token(t2).prefix == a2.prefix  # a whole token names its own prefix
    tokens.create_token(alice)
    revoked = tokens.revoke_all(alice)
    assert len(revoked) == 1 and revoked[0].username == "alice"
    assert [record.prefix for record in tokens.list_tokens()] == [b1.prefix]
    assert authenticates(t3) == bob


def test_a_prefix_must_name_exactly_one_token(alice):
    first, _ = tokens.create_token(alice)
    second, _ = tokens.create_token(alice)
    with pytest.raises(tokens.InvalidPrefix):
        tokens.revoke_token(first.prefix[:7])
    with pytest.raises(tokens.TokenNotFound):
        tokens.revoke_token("ffffffffffffffff" if not first.prefix.startswith("ffff") else "0000000000000")
    # Two prefixes that share their first 8 characters: 8 of them are ambiguous, 15 are not.
    AuthToken.objects.filter(token_key=second.prefix).update(token_key=first.prefix[:8] + second.prefix[8:])
    with pytest.raises(tokens.AmbiguousPrefix):
        tokens.revoke_token(first.prefix[:8])
    assert AuthToken.objects.count() == 2
    tokens.revoke_token(first.prefix)
    assert AuthToken.objects.count() == 1


def test_without_knox_every_call_says_what_to_do(alice, monkeypatch):
    with without_knox():
        assert not tokens.knox_installed()
        with pytest.raises(tokens.TokensUnavailable, match='"knox" in INSTALLED_APPS'):
            tokens.create_token(alice)
        monkeypatch.setitem(sys.modules, "knox", None)  # as if the package were not installed
        with pytest.raises(tokens.TokensUnavailable, match=r'"tokens" extra, or pip install "django-rest-knox'):
            tokens.list_tokens()


def test_a_missing_table_is_a_clear_store_error(alice):
    with knox_table_missing():
        with pytest.raises(tokens.TokenStoreError, match="manage.py migrate"):
            tokens.list_tokens()
        with pytest.raises(tokens.TokenStoreError):
            tokens.create_token(alice)


def test_durations_read_as_words():
    assert tokens.duration_text(None) == "never expires"
    assert tokens.duration_text(dt.timedelta(hours=10)) == "10 hours"
    assert tokens.duration_text(dt.timedelta(days=1, hours=6)) == "1 day 6 hours"
    assert tokens.duration_text(dt.timedelta(days=30)) == "30 days"


# ============================================================================ manage.py fdbqueue token


def test_cli_create_prints_the_token_alone_and_the_note_on_stderr(alice):
    result = ok("token", "create", "alice")
    token = result.out.strip()
    assert TOKEN_RE.match(token) and result.out == token + "\n"
    assert authenticates(token) == alice
    prefix = AuthToken.objects.get().token_key
    assert prefix in result.err and "shown only this once" in result.err and token not in result.err


def test_cli_create_json_and_lifetimes(alice):
    data = ok("token", "create", "alice", "--json").json()
    assert set(data) == {"token", "prefix", "user", "created", "expiry", "expired", "scope"}
    assert data["scope"] is None
    assert data["user"] == "alice" and data["prefix"] == data["token"][:15] and data["expired"] is False
    assert re.fullmatch(ISO_UTC, data["created"]) and near(data["expiry"], timezone.now() + dt.timedelta(hours=10))
    assert authenticates(data["token"]) == alice

    data = ok("token", "create", "alice", "--expires-days", "2.5", "--json").json()
    assert near(data["expiry"], timezone.now() + dt.timedelta(days=2.5))
    data = ok("token", "create", "alice", "--no-expiry", "--json").json()
    assert data["expiry"] is None


@pytest.mark.parametrize(
    "args",
    [
        ("token", "create", "nobody"),
        ("token", "create", "alice", "--expires-days", "0"),
        ("token", "create", "alice", "--expires-days", "-3"),
        ("token", "create", "alice", "--expires-days", "nan"),
        ("token", "create", "alice", "--expires-days", "soon"),
        ("token", "create", "alice", "--expires-days", "4000"),
        ("token", "create", "alice", "--expires-days", "3", "--no-expiry"),
        ("token", "create"),
        ("token",),
        ("token", "frobnicate"),
    ],
)
def test_cli_create_refuses_bad_input_with_exit_code_2(alice, args):
    result = run(*args)
    assert result.code == 2, result
    assert result.out == "" and result.err.strip()
    assert not AuthToken.objects.exists()


def test_cli_create_refuses_inactive_users(alice):
    alice.is_active = False
    alice.save()
    result = run("token", "create", "alice")
    assert result.code == 2 and "inactive" in result.err and result.out == ""


def test_cli_list_shows_prefixes_never_tokens(alice, bob):
    _, alice_token = tokens.create_token(alice)
    old, bob_token = tokens.create_token(bob, expiry=dt.timedelta(days=1))
    AuthToken.objects.filter(token_key=old.prefix).update(expiry=timezone.now() - dt.timedelta(minutes=1))

    out = ok("token", "list").out
    lines = out.splitlines()
    assert lines[0].split() == ["PREFIX", "USER", "CREATED", "EXPIRES", "STATUS", "SCOPE"]
    assert alice_token not in out and bob_token not in out
    assert any(line.startswith(alice_token[:15]) and " active " in line for line in lines)
    assert any(line.startswith(bob_token[:15]) and " expired " in line for line in lines)

    data = ok("token", "list", "alice", "--json").json()
    assert [(t["prefix"], t["user"], t["expired"]) for t in data["tokens"]] == [(alice_token[:15], "alice", False)]
    assert ok("token", "--json", "list", "bob").json()["tokens"][0]["expired"] is True
    assert alice_token not in json.dumps(data)


def test_cli_list_when_there_is_nothing(alice):
    assert ok("token", "list").out.strip() == "No tokens."
    assert ok("token", "list", "--json").json() == {"tokens": []}
    result = run("token", "list", "nobody")
    assert result.code == 2 and "nobody" in result.err


def test_cli_revoke_asks_first_and_refuses_without_a_terminal(alice):
    record, token = tokens.create_token(alice)
    result = run("token", "revoke", record.prefix)  # standard input is not a terminal under pytest
    assert result.code == 2 and "--yes" in result.err
    declined = run("token", "revoke", record.prefix, stdin=Terminal("n\n"))
    assert declined.code == 2 and "Revoke token" in declined.err
    assert authenticates(token) == alice

    accepted = run("token", "revoke", record.prefix[:10], stdin=Terminal("y\n"))
    assert accepted.code == 0, accepted.err
    assert f"Revoked token {record.prefix}" in accepted.out
    assert authenticates(token) is None


def test_cli_revoke_with_yes_and_json(alice):
    record, token = tokens.create_token(alice)
    data = ok("token", "revoke", record.prefix, "--yes", "--json").json()
    assert data["revoked"] == 1 and data["tokens"][0]["prefix"] == record.prefix
    assert token not in json.dumps(data)
    assert not AuthToken.objects.exists()


def test_cli_revoke_all_of_a_user(alice, bob):
    for user in (alice, alice, bob):
        tokens.create_token(user)
    declined = run("token", "revoke", "--all", "alice", stdin=Terminal("\n"))
    assert declined.code == 2 and "Revoke all 2 tokens of 'alice'?" in declined.err
    assert AuthToken.objects.count() == 3
    result = ok("token", "revoke", "--all", "alice", "--yes")
    assert "Revoked 2 tokens of 'alice'." in result.out
    assert [row.user.username for row in AuthToken.objects.all()] == ["bob"]
    assert ok("token", "revoke", "--all", "alice", "--yes", "--json").json() == {"revoked": 0, "tokens": []}


@pytest.mark.parametrize(
    "args",
    [
        ("token", "revoke", "--yes"),  # neither a prefix nor --all
        ("token", "revoke", "0123456789abcde", "--all", "alice", "--yes"),  # both
        ("token", "revoke", "abc", "--yes"),  # too short to name one token safely
        ("token", "revoke", "0123456789abcde", "--yes"),  # no such token
        ("token", "revoke", "--all", "nobody", "--yes"),
    ],
)
def test_cli_revoke_refuses_bad_input(alice, args):
    record, token = tokens.create_token(alice)
    if record.prefix.startswith("0123456789abcde"):  # pragma: no cover - one chance in 2**60
        pytest.skip("the random token happens to have the made-up prefix")
    result = run(*args)
    assert result.code == 2, result
    assert result.out == ""
    assert authenticates(token) == alice


def test_cli_without_knox_says_what_to_install(alice):
    with without_knox():
        result = run("token", "create", "alice")
    assert result.code == 2
    assert '"knox" in INSTALLED_APPS' in result.err and result.out == ""


def test_cli_database_failure_is_exit_code_3(alice):
    with knox_table_missing():
        result = run("token", "list")
    assert result.code == 3 and "manage.py migrate" in result.err and result.out == ""


# ============================================================================ the admin's token pages


def page(name: str, *args: str) -> str:
    return reverse(f"admin:fdbqueue_queue_{name}", args=args)


def knox_perms(*codenames: str) -> list[Permission]:
    return list(Permission.objects.filter(content_type__app_label="knox", codename__in=codenames))


@pytest.fixture
def staff_with(django_user_model, client):
    """A logged-in staff user holding the given knox permissions (codenames such as view_authtoken)."""

    def make(*codenames: str, username: str = "keeper") -> Client:
        user = django_user_model.objects.create_user(username, is_staff=True)
        user.user_permissions.set(knox_perms(*codenames))
        client.force_login(user)
        return client

    return make


@pytest.fixture
def keeper(staff_with) -> Client:
    """Staff allowed to see, create and revoke tokens (not a superuser)."""
    return staff_with("view_authtoken", "add_authtoken", "delete_authtoken")


def create(client: Client, username: str, lifetime: str = "default"):
    return client.post(page("token_create"), {"username": username, "lifetime": lifetime})


def shown_token(response) -> str:
    match = re.search(r'id="new-token"[^>]*value="([^"]+)"', response.content.decode())
    assert match, response.content.decode()
    return match.group(1)


def test_staff_without_knox_permissions_are_refused(staff_with, alice):
    record, token = tokens.create_token(alice)
    client = staff_with()
    assert client.get(page("tokens")).status_code == 403
    assert create(client, "alice").status_code == 403
    assert client.get(page("token_revoke", record.prefix)).status_code == 403
    assert client.post(page("token_revoke", record.prefix), {"confirm": "True"}).status_code == 403
    assert client.post(page("token_revoke_all", str(alice.pk)), {"confirm": "True"}).status_code == 403
    assert AuthToken.objects.count() == 1 and authenticates(token) == alice
    # ... and the queue list does not offer the link.
    assert "tokens-link" not in client.get(reverse("admin:fdbqueue_queue_changelist")).content.decode()


def test_view_permission_shows_the_list_only(staff_with, alice):
    record, token = tokens.create_token(alice)
    client = staff_with("view_authtoken")
    listing = client.get(page("tokens")).content.decode()
    assert record.prefix in listing and "alice" in listing
    assert 'id="create-token"' not in listing and "Revoke…" not in listing
    assert create(client, "alice").status_code == 403
    assert client.post(page("token_revoke", record.prefix), {"confirm": "True"}).status_code == 403
    assert AuthToken.objects.count() == 1


def test_the_queue_list_links_to_the_tokens(staff_with, fdbqueue_db):
    client = staff_with("view_authtoken")
    user = client.get(page("tokens")).wsgi_request.user
    user.user_permissions.add(Permission.objects.get(content_type__app_label="fdbqueue", codename="view_queue"))
    listing = client.get(reverse("admin:fdbqueue_queue_changelist"))
    assert listing.status_code == 200
    assert f'href="{page("tokens")}" id="tokens-link"' in listing.content.decode()


def test_creating_a_token_shows_it_once(keeper, alice):
    response = create(keeper, "alice", "7")
    assert response.status_code == 200
    token = shown_token(response)
    assert authenticates(token) == alice
    assert "no-store" in response["Cache-Control"]
    row = AuthToken.objects.get()
    assert near(row.expiry, timezone.now() + dt.timedelta(days=7))
    assert "shown only this once" in response.content.decode()

    # Never again: not on the list, not in a message, not in a cookie.
    listing = keeper.get(page("tokens"))
    text = listing.content.decode()
    assert token not in text and row.digest not in text
    assert row.token_key in text and "alice" in text
    assert all(token not in morsel.value for morsel in keeper.cookies.values())


@pytest.mark.parametrize(
    ("lifetime", "expected"), [("never", None), ("1", dt.timedelta(days=1)), ("default", dt.timedelta(hours=10))]
)
def test_lifetimes_offered_by_the_form(keeper, alice, lifetime, expected):
    assert create(keeper, "alice", lifetime).status_code == 200
    expiry = AuthToken.objects.get().expiry
    assert expiry is None if expected is None else near(expiry, timezone.now() + expected)


def test_bad_create_input_shows_the_form_again_and_creates_nothing(keeper, alice, root):
    alice.is_active = False
    alice.save()
    for username, lifetime, message in [
        ("nobody", "7", "No user is named"),
        ("alice", "7", "inactive"),
        ("root", "7", "Only a superuser may create a token for a superuser"),
        ("bob", "forever", "Select a valid choice"),
    ]:
        response = create(keeper, username, lifetime)
        assert response.status_code == 400, username
        assert message in response.content.decode(), username
        assert 'id="new-token"' not in response.content.decode()
    assert not AuthToken.objects.exists()


def test_a_superuser_may_create_a_superusers_token(client, root):
    client.force_login(root)
    assert authenticates(shown_token(create(client, "root"))) == root


def test_revoking_one_token_asks_first(keeper, alice):
    record, token = tokens.create_token(alice)
    confirm = keeper.get(page("token_revoke", record.prefix))
    assert confirm.status_code == 200 and record.prefix in confirm.content.decode()
    assert authenticates(token) == alice  # a GET changes nothing

    done = keeper.post(page("token_revoke", record.prefix), {"confirm": "True"}, follow=True)
    assert done.redirect_chain[-1][0] == page("tokens")
    assert "was revoked" in done.content.decode()
    assert authenticates(token) is None and not AuthToken.objects.exists()

    again = keeper.post(page("token_revoke", record.prefix), {"confirm": "True"}, follow=True)
    assert "no longer exists" in again.content.decode()


def test_revoking_all_of_a_users_tokens(keeper, alice, bob):
    for user in (alice, alice, bob):
        tokens.create_token(user)
    listing = keeper.get(page("tokens"), {"user": "alice"}).content.decode()
    assert page("token_revoke_all", str(alice.pk)) in listing
    confirm = keeper.get(page("token_revoke_all", str(alice.pk)))
    assert "revoke all 2 tokens" in confirm.content.decode()
    keeper.post(page("token_revoke_all", str(alice.pk)), {"confirm": "True"})
    assert [row.user.username for row in AuthToken.objects.all()] == ["bob"]
    assert keeper.get(page("token_revoke_all", "999999")).status_code == 404
    assert keeper.get(page("token_revoke_all", "not-a-pk")).status_code == 404


def test_the_list_filters_by_user_and_escapes_names(keeper, django_user_model):
    odd = django_user_model.objects.create_user("<b>odd</b>")
    tokens.create_token(odd)
    text = keeper.get(page("tokens")).content.decode()
    assert "<b>odd</b>" not in text and "&lt;b&gt;odd&lt;/b&gt;" in text
    assert "No user is named" in keeper.get(page("tokens"), {"user": "nobody"}).content.decode()


def test_token_forms_need_the_csrf_token(alice, django_user_model):
    user = django_user_model.objects.create_user("keeper", is_staff=True)
    user.user_permissions.set(knox_perms("view_authtoken", "add_authtoken", "delete_authtoken"))
    record, token = tokens.create_token(alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert create(client, "alice").status_code == 403
    assert client.post(page("token_revoke", record.prefix), {"confirm": "True"}).status_code == 403
    assert client.post(page("token_revoke_all", str(alice.pk)), {"confirm": "True"}).status_code == 403
    assert AuthToken.objects.count() == 1 and authenticates(token) == alice

    # With the token from the page, the same form goes through.
    listing = client.get(page("tokens")).content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', listing).group(1)
    response = client.post(page("token_create"), {"username": "alice", "lifetime": "1", "csrfmiddlewaretoken": csrf})
    assert response.status_code == 200 and authenticates(shown_token(response)) == alice


def test_a_database_failure_is_a_503_page_without_details(keeper, alice):
    with knox_table_missing():
        response = keeper.get(page("tokens"))
    assert response.status_code == 503
    text = response.content.decode()
    assert "did not answer" in text and "no such table" not in text


def test_without_knox_the_pages_are_gone(keeper):
    with without_knox():
        assert keeper.get(page("tokens")).status_code == 404
        names = {pattern.name for pattern in admin.site._registry[Queue].get_urls()}
        assert not any("token" in name for name in names)
        assert "fdbqueue_queue_changelist" in names


# -- one place for tokens: knox's own admin leads to the token pages ----------------------------


def test_the_admin_index_lists_tokens_once_and_leads_to_the_token_pages(client, root):
    client.force_login(root)
    index = client.get(reverse("admin:index")).content.decode()
    knox_list = reverse("admin:knox_authtoken_changelist")
    entry = reverse("admin:fdbqueue_tokensentry_changelist")
    rows = re.findall(r'<tr class="model-(\w+)', index)
    assert [row for row in rows if "token" in row] == ["tokensentry"], rows
    assert index.count(">API tokens<") == 1 and "Auth tokens" not in index
    assert f'href="{entry}"' in index and f'href="{knox_list}"' not in index
    assert client.get(entry)["Location"] == page("tokens")

    response = client.get(knox_list)
    assert response.status_code == 302 and response["Location"] == page("tokens")
    assert client.get(reverse("admin:knox_authtoken_add"))["Location"] == page("tokens") + "#create-token"
    assert client.get(knox_list, {"user": "root"})["Location"] == page("tokens") + "?user=root"


def test_knox_admin_pages_no_longer_show_digests(client, root, alice):
    record, token = tokens.create_token(alice)
    row = AuthToken.objects.get()
    client.force_login(root)
    knox_list = reverse("admin:knox_authtoken_changelist")
    for address in (
        reverse("admin:knox_authtoken_change", args=(row.pk,)),
        f"{knox_list}{row.pk}/delete/",
        f"{knox_list}{row.pk}/history/",
    ):
        response = client.get(address, follow=True)
        assert response.redirect_chain[-1][0] == page("tokens"), address
        text = response.content.decode()
        assert row.digest not in text and record.prefix in text
    # Nothing is changed on the way: a POST to knox's old delete address deletes nothing.
    client.post(f"{knox_list}{row.pk}/delete/", {"post": "yes"})
    assert authenticates(token) == alice


def test_the_index_entry_follows_knox_permissions(staff_with, django_user_model):
    knox_list = reverse("admin:knox_authtoken_changelist")
    entry = reverse("admin:fdbqueue_tokensentry_changelist")
    viewer = staff_with("view_authtoken", username="viewer")
    assert f'href="{entry}"' in viewer.get(reverse("admin:index")).content.decode()
    assert viewer.get(entry, follow=True).status_code == 200
    assert viewer.get(knox_list, follow=True).status_code == 200

    nobody = staff_with(username="nobody")
    assert entry not in nobody.get(reverse("admin:index")).content.decode()
    assert nobody.get(entry, follow=True).status_code == 403
    assert nobody.get(knox_list, follow=True).status_code == 403


def test_anonymous_visitors_of_knox_admin_go_to_the_login(client):
    response = client.get(reverse("admin:knox_authtoken_changelist"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login"))


REGISTERED_TOKEN_ADMIN = """
import django
django.setup()
from django.contrib import admin
from knox.models import AuthToken
print(type(admin.site._registry[AuthToken]).__name__)
"""


@pytest.mark.parametrize("knox_first", [True, False], ids=["knox-first", "knox-last"])
def test_knox_admin_is_replaced_whatever_the_order_of_installed_apps(tmp_path, knox_first):
    """The admin's autodiscovery imports the apps' admin modules in INSTALLED_APPS order; knox's
    entry is replaced whether its module comes before the app's or after it."""
    import subprocess

    from .processes import REPO_ROOT

    apps = [app for app in django_settings.INSTALLED_APPS if app != "knox"]
    apps.insert(apps.index("django_fdbqueue") + (0 if knox_first else len(apps)), "knox")
    (tmp_path / "ordered_settings.py").write_text(
        f"from tests.settings import *  # noqa: F401,F403\n\nINSTALLED_APPS = {apps!r}\n", encoding="utf-8"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "ordered_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO_ROOT)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", REGISTERED_TOKEN_ADMIN],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "TokenPagesAdmin"
