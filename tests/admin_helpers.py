"""Users, logged-in clients and addresses for the admin page tests (Django's test client).

Shared by test_admin.py and test_admin_leases.py so both log in with the same permissions and
read the pages the same way. Import the fixtures by name into a test module to use them there.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

#: Every action on every queue (django_fdbqueue.access.PERMISSIONS): what an operator may do today.
PERMS = ("view_queue", "push_queue", "consume_queue", "manage_queue", "delete_queue")


def url(view: str, *args: str | None) -> str:
    """The address of an admin queue page; a None argument is left out (the list and add pages
    take no queue name, so a test may pass ``name=None`` for them)."""
    return reverse(f"admin:fdbqueue_queue_{view}", args=[arg for arg in args if arg is not None])


def make_user(django_user_model, username: str, *, staff: bool = True, perms=()):
    user = django_user_model.objects.create_user(username, password="pw-" + username, is_staff=staff)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="fdbqueue", codename__in=perms))
    return user


@pytest.fixture
def operator(django_user_model):
    """A staff user holding every queue permission (and nothing else)."""
    return make_user(django_user_model, "operator", perms=PERMS)


@pytest.fixture
def client_for(client):
    def log_in(user) -> Client:
        client.force_login(user)
        return client

    return log_in


@pytest.fixture
def op(client_for, operator) -> Client:
    return client_for(operator)


def text(response) -> str:
    return response.content.decode()
