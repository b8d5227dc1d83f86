"""The demo's set-up command: sample queues created once, and a way to log in."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from django_fdbqueue import service
from django_fdbqueue.management.commands.fdbqueue_demo import SAMPLE_QUEUES

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("fdbqueue_demo", *args, stdout=out)
    return out.getvalue()


@pytest.fixture(autouse=True)
def no_superuser_env(monkeypatch):
    for var in ("DJANGO_SUPERUSER_USERNAME", "DJANGO_SUPERUSER_PASSWORD", "DJANGO_SUPERUSER_EMAIL"):
        monkeypatch.delenv(var, raising=False)


def sizes(db) -> dict[str, int]:
    return {info.name: info.size for info in service.list_queues(db).items}


def test_it_seeds_sample_queues_once(fdbqueue_db):
    output = run()
    expected = {name: len(items) for name, _, items in SAMPLE_QUEUES}
    assert sizes(fdbqueue_db) == expected
    assert "Created" in output

    output = run()
    assert sizes(fdbqueue_db) == expected
    assert "already exists" in output
    assert service.get_queue(fdbqueue_db, "demo.jobs").pushed == expected["demo.jobs"]


def test_it_leaves_changed_queues_alone_unless_reset(fdbqueue_db):
    run()
    service.pop(fdbqueue_db, "demo.jobs", end="max")
    run()
    assert service.size(fdbqueue_db, "demo.jobs") == 4  # the user's pop stands
    run("--reset")
    assert service.get_queue(fdbqueue_db, "demo.jobs").popped == 0
    assert service.size(fdbqueue_db, "demo.jobs") == 5


def test_without_credentials_it_prints_the_login_step(fdbqueue_db):
    output = run()
    assert "manage.py createsuperuser" in output
    assert "http://127.0.0.1:8000/admin/fdbqueue/queue/" in output
    assert not get_user_model().objects.exists()


def test_with_credentials_it_creates_the_superuser_once(fdbqueue_db, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_USERNAME", "demo")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "demo-password")
    output = run()
    user = get_user_model().objects.get(username="demo")
    assert user.is_superuser and user.check_password("demo-password")
    assert "Created superuser demo." in output
    assert "createsuperuser" not in output

    output = run()
    assert "already exists" in output
    assert get_user_model().objects.count() == 1
