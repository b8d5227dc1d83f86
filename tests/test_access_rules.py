"""django_fdbqueue.access: can, require, visible_queues and may_see, grants, patterns and scoped tokens.

The rules live in the project's SQL database (grants, scopes, Django permissions), not in the queue
store, so these tests need no engine; tests/test_api_access_matrix.py runs them through REST on both.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from knox.models import AuthToken

from django_fdbqueue import access
from django_fdbqueue import rights
from django_fdbqueue.access import events
from django_fdbqueue.exceptions import InvalidQueueName
from django_fdbqueue.models import QueueGrant, TokenScope
from django_fdbqueue.service._internals import checks
from django_fdbqueue.tokens import service as tokens

from .cli_helpers import run

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice")


def grant(actions: str, pattern: str, *, user=None, group=None) -> QueueGrant:
    return QueueGrant.objects.create(user=user, group=group, pattern=pattern, actions=actions)


def allowed(user, queue: str, token=None) -> set[str]:
    return {action for action in access.ACTIONS if access.can(user, action, queue, token=token)}


# ----------------------------------------------------------------------------- patterns and actions


@pytest.mark.parametrize(
    ("pattern", "kind", "matching", "not_matching"),
    [
        ("orders", "literal", ["orders"], ["orders.eu", "orders2", "order"]),
        ("orders.*", "prefixed", ["orders.eu", "orders.eu.paris", "orders.x"], ["orders", "orders2", "xorders.eu"]),
        ("*", "all", ["orders", "a", "~", "-"], []),
        ("a-b_c.d", "literal", ["a-b_c.d"], ["a-b_c.de"]),
    ],
)
def test_patterns_match_literally_by_prefix_or_everything(pattern, kind, matching, not_matching):
    parsed = access.parse_pattern(pattern)
    assert parsed.kind == kind and str(parsed) == pattern
    assert all(parsed.matches(name) for name in matching)
    assert not any(parsed.matches(name) for name in not_matching)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("orders*", "'*' may only stand alone"),
        ("*.orders", "'*' may only stand alone"),
        ("ord*ers", "'*' may only stand alone"),
        ("orders.**", "'*' may only stand alone"),
        (".*", "not a valid prefix"),
        ("or ders", "characters a queue name cannot have"),
        ("orders/eu", "characters a queue name cannot have"),
        ("x" * 201, "too long"),
        ("x" * 199 + ".*", "not a valid prefix"),
        (None, "must be text"),
    ],
)
def test_bad_patterns_say_what_is_wrong(text, words):
    with pytest.raises(access.PatternError, match="orders.*") as raised:
        access.parse_pattern(text)
    assert words in str(raised.value)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize("name", ["a", "orders.eu", "x" * 200, "x" * 201, "", "a b", "é", "a/b", "a*", ".", "-_."])
def test_the_mirrored_name_rule_agrees_with_the_service(name):
    try:
        checks.check_name(name)
        valid = True
    except InvalidQueueName:
        valid = False
    assert bool(rights._NAME_RE.fullmatch(name)) == valid


def test_actions_are_checked_and_kept_in_canonical_order():
    assert access.ACTIONS == ("view", "push", "consume", "manage", "delete")
    assert access.parse_actions("delete, push,push") == ("push", "delete")
    assert access.check_action(access.Action.MANAGE) == "manage"
    for bad in ("", "read", "push,", "PUSH"):
        with pytest.raises(ValueError, match="view, push, consume, manage, delete"):
            access.parse_actions(bad)
    with pytest.raises(ValueError, match="Unknown action 'write'"):
        access.can(None, "write", "q")


def test_every_viewset_route_has_an_action():
    from django_fdbqueue.api.urls import router

    routes = {(basename, action) for _prefix, viewset, basename in router.registry for action in _actions_of(viewset)}
    assert routes == set(access.REST_ROUTES)


def _actions_of(viewset) -> set[str]:
    standard = {"list", "create", "retrieve", "partial_update", "destroy"} & set(dir(viewset))
    return standard | {extra.__name__ for extra in viewset.get_extra_actions()}


# ----------------------------------------------------------------------------- who has what


def test_superusers_may_do_everything_inactive_and_anonymous_users_nothing(django_user_model, alice):
    root = django_user_model.objects.create_superuser("root")
    assert allowed(root, "any") == set(access.ACTIONS)
    grant("view,push,consume,manage,delete", "*", user=alice)
    assert allowed(alice, "any") == set(access.ACTIONS)
    alice.is_active = False
    assert allowed(alice, "any") == set()
    root.is_active = False
    assert allowed(root, "any") == set()
    assert allowed(AnonymousUser(), "any") == set() and allowed(None, "any") == set()


def test_a_user_without_grants_or_permissions_may_do_nothing(alice):
    assert allowed(alice, "orders") == set()
    assert not access.can_every(alice, "view")


def test_grants_give_their_actions_on_their_patterns(alice):
    grant("view,push", "orders.*", user=alice)
    grant("consume", "jobs", user=alice)
    assert allowed(alice, "orders.eu") == {"view", "push"}
    assert allowed(alice, "orders") == set()
    assert allowed(alice, "jobs") == {"consume"}
    assert allowed(alice, "jobs.x") == set()
    assert not access.can_every(alice, "view")
    grant("view", "*", user=alice)
    assert access.can_every(alice, "view") and allowed(alice, "anything") == {"view"}


def test_groups_grants_count_and_leaving_the_group_takes_them_away(alice):
    workers = Group.objects.create(name="workers")
    grant("consume", "jobs.*", group=workers)
    assert allowed(alice, "jobs.a") == set()
    alice.groups.add(workers)
    assert allowed(alice, "jobs.a") == {"consume"}  # the cache was dropped by the change
    alice.groups.remove(workers)
    assert allowed(alice, "jobs.a") == set()


def test_revoking_a_grant_applies_at_once(alice):
    given = grant("push", "q", user=alice)
    assert access.can(alice, "push", "q")
    given.delete()
    assert not access.can(alice, "push", "q")


@pytest.mark.parametrize("action", ["view", "push", "consume", "manage", "delete"])
def test_a_django_permission_gives_its_action_on_every_queue(django_user_model, action):
    user = django_user_model.objects.create_user(f"holder-{action}")
    codename = access.PERMISSIONS[action].split(".")[1]
    user.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label="fdbqueue"))
    user = django_user_model.objects.get(pk=user.pk)  # Django caches permissions on the instance
    assert allowed(user, "a") == allowed(user, "z.y") == {action}
    assert access.can_every(user, action)


def test_a_groups_django_permission_counts(django_user_model, alice):
    ops = Group.objects.create(name="ops")
    ops.permissions.add(Permission.objects.get(codename="view_queue"))
    alice.groups.add(ops)
    alice = django_user_model.objects.get(pk=alice.pk)
    assert allowed(alice, "anything") == {"view"}


def test_require_raises_a_refusal_that_says_whether_the_queue_may_be_seen(alice):
    grant("view", "seen", user=alice)
    access.require(alice, "view", "seen")
    with pytest.raises(access.QueueAccessDenied) as seen:
        access.require(alice, "push", "seen")
    assert (seen.value.code, seen.value.action, seen.value.queue, seen.value.visible) == (
        "permission_denied",
        "push",
        "seen",
        True,
    )
    with pytest.raises(access.QueueAccessDenied) as hidden:
        access.require(alice, "push", "hidden")
    assert (hidden.value.code, hidden.value.visible) == ("queue_not_found", False)
    assert str(hidden.value) == "No queue is named 'hidden'."


def test_refusals_are_reported_to_listeners(alice):
    heard = []
    events.add_listener(lambda event, action: heard.append((event, action)))
    try:
        with pytest.raises(access.QueueAccessDenied):
            access.require(alice, "delete", "q")
    finally:
        events._listeners.pop()
    assert heard == [("refused", "delete")]


def test_visible_queues_and_may_see(alice):
    grant("view", "a.*", user=alice)
    grant("push", "b", user=alice)
    assert access.visible_queues(alice, ["a.1", "b", "c", "a.2"]) == ["a.1", "a.2"]
    assert access.may_see(alice, "b") and access.may_see(alice, "a.1") and not access.may_see(alice, "c")


def test_access_authenticated_gives_any_active_user_everything(settings, alice):
    settings.FDBQUEUE = {**settings.FDBQUEUE, "ACCESS": "authenticated"}
    assert allowed(alice, "q") == set(access.ACTIONS)
    alice.is_active = False
    assert allowed(alice, "q") == set()


# ----------------------------------------------------------------------------- scoped tokens


def token_with(user, *rules: str) -> AuthToken:
    record, _token = tokens.create_token(user, scope=list(rules) or None)
    return AuthToken.objects.get(token_key=record.prefix)


def test_a_scope_narrows_a_token_to_its_rules(alice):
    grant("view,push,consume,manage,delete", "*", user=alice)
    token = token_with(alice, "push:orders.*", "consume,view:jobs")
    assert allowed(alice, "orders.eu", token) == {"push"}
    assert allowed(alice, "jobs", token) == {"consume", "view"}
    assert allowed(alice, "other", token) == set()
    assert not access.can_every(alice, "view", token=token)
    assert allowed(alice, "other", token_with(alice)) == set(access.ACTIONS)  # no scope: the user's rights


def test_a_scope_never_exceeds_its_user(alice):
    grant("push", "orders.eu", user=alice)
    token = token_with(alice, "view,push,consume,manage,delete:*")
    assert allowed(alice, "orders.eu", token) == {"push"}
    assert allowed(alice, "orders.us", token) == set()


def test_a_tokens_scope_goes_with_it(alice):
    token = token_with(alice, "push:q")
    assert TokenScope.objects.filter(digest=token.digest).exists()
    tokens.revoke_token(token.token_key)
    assert not TokenScope.objects.exists()


# ----------------------------------------------------------------------------- bad input stores nothing


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"pattern": "orders*", "actions": "push"}, "'*' may only stand alone"),
        ({"pattern": "", "actions": "push"}, "cannot be blank"),
        ({"pattern": "q", "actions": "push,write"}, "Unknown action 'write'"),
        ({"pattern": "q", "actions": ""}, "cannot be blank"),
        ({"pattern": "q", "actions": ","}, "at least one action"),
    ],
)
def test_a_bad_grant_is_refused_and_nothing_is_stored(alice, fields, words):
    with pytest.raises(ValidationError, match=words):
        QueueGrant.objects.create(user=alice, **fields)
    assert not QueueGrant.objects.exists()


def test_a_grant_is_to_exactly_one_user_or_group(alice):
    group = Group.objects.create(name="g")
    for grantee in ({}, {"user": alice, "group": group}):
        with pytest.raises(ValidationError, match="exactly one"):
            QueueGrant.objects.create(pattern="q", actions="view", **grantee)
    # The database refuses it too, for code that bypasses save() and the manager's bulk_create checks.
    with pytest.raises(IntegrityError), transaction.atomic():
        QueueGrant._base_manager.bulk_create([QueueGrant(pattern="q", actions="view")])
    assert not QueueGrant.objects.exists()


def test_a_grants_actions_are_stored_in_canonical_order(alice):
    assert grant("delete,view, view", "q", user=alice).actions == "view,delete"


@pytest.mark.parametrize("rules", [["push"], ["push:orders*"], ["write:q"], [":q"], [], "push:q"])
def test_a_malformed_scope_is_refused_and_no_token_is_stored(alice, rules):
    with pytest.raises(tokens.InvalidScope):
        tokens.create_token(alice, scope=rules)
    assert not AuthToken.objects.exists() and not TokenScope.objects.exists()
    with pytest.raises(ValidationError):
        TokenScope.objects.create(digest="d" * 128, token_key="k", rules=rules)
    assert not TokenScope.objects.exists()


def test_cli_token_create_stores_the_scope_and_list_shows_it(alice):
    result = run("token", "create", "alice", "--scope", "push:orders.*", "--scope", "view,consume:jobs", "--json")
    assert result.code == 0, result
    data = result.json()
    assert data["scope"] == ["push:orders.*", "view,consume:jobs"]
    listed = run("token", "list", "--json").json()["tokens"]
    assert [token["scope"] for token in listed] == [["push:orders.*", "view,consume:jobs"]]
    assert "push:orders.* view,consume:jobs" in run("token", "list").out


@pytest.mark.parametrize("scope", ["push", "push:orders*", "write:q", "push:"])
def test_cli_token_create_refuses_a_malformed_scope_and_stores_nothing(alice, scope):
    result = run("token", "create", "alice", "--scope", "view:q", "--scope", scope)
    assert result.code == 2 and result.out == ""
    assert "Malformed scope" in result.err
    assert not AuthToken.objects.exists() and not TokenScope.objects.exists()


def test_bulk_writes_of_grants_and_scopes_drop_the_cached_rights(django_user_model):
    """Issue 36: ``QuerySet.update`` and ``bulk_create`` send no per-row signal, so a process kept
    the rights it had cached (up to CACHE_SECONDS) after they changed in the database."""
    user = django_user_model.objects.create_user("bulk")
    QueueGrant.objects.create(user=user, pattern="orders.*", actions="view")
    assert access.can(user, "view", "orders.eu")  # cached now
    QueueGrant.objects.filter(user=user).update(pattern="billing.*")
    assert not access.can(user, "view", "orders.eu") and access.can(user, "view", "billing.in")
    QueueGrant.objects.bulk_create([QueueGrant(user=user, pattern="orders.*", actions="push")])
    assert access.can(user, "push", "orders.eu")
    grant = QueueGrant.objects.get(pattern="billing.*")
    grant.actions = "push"
    QueueGrant.objects.bulk_update([grant], ["actions"])
    assert not access.can(user, "view", "billing.in")


def test_bulk_create_checks_grants_and_scopes_as_save_does(django_user_model):
    user = django_user_model.objects.create_user("bulk")
    with pytest.raises(ValidationError):
        QueueGrant.objects.bulk_create([QueueGrant(user=user, pattern="orders.*", actions="fly")])
    with pytest.raises(ValidationError):
        TokenScope.objects.bulk_create([TokenScope(digest="d", token_key="k", rules=["fly:*"])])
    assert not QueueGrant.objects.exists() and not TokenScope.objects.exists()
