"""Clients for tests that bring a store of their own (an outage, a cluster they start).

Users come from get_user_model(), not pytest-django's django_user_model: that one pulls in
conftest's engine-parametrized `db` fixture, which such tests must not be run under.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tests.admin_helpers import PERMS, make_user


@pytest.fixture
def api() -> APIClient:
    """A REST client authenticated as a plain user who may do everything to every queue."""
    client = APIClient()
    client.force_authenticate(user=make_user(get_user_model(), "alice", staff=False, perms=PERMS))
    return client


@pytest.fixture
def operator_client(client):
    """The admin as a staff user with the queue permissions."""
    client.force_login(make_user(get_user_model(), "operator", perms=PERMS))
    return client
