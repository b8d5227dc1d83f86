"""The docs' snippet runner (``tests/docsnippets``), on small pages written for each test.

Each page runs as the docs' pages do: against a fresh store (the app's ``fdbqueue_store``), on
both engines, with Django's test database.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

from tests.docsnippets import SnippetFailure, run_page
from tests.docsnippets.blocks import opted_out
from tests.docsnippets.console import matches

pytestmark = pytest.mark.django_db

FENCE = "```"


def page(tmp_path, text: str):
    """A page at tmp_path/page.md (``'''`` stands for a fence, to keep the tests readable)."""
    path = tmp_path / "page.md"
    path.write_text(textwrap.dedent(text).replace("'''", FENCE), encoding="utf-8")
    return path


def fails(tmp_path, text: str) -> str:
    path = page(tmp_path, text)
    with pytest.raises(SnippetFailure) as failure:
        run_page(path, tmp_path / "project")
    return str(failure.value)


def test_a_passing_page_runs_its_blocks_in_order_on_a_fresh_store(fdbqueue_store, tmp_path):
    path = page(
        tmp_path,
        """\
        # Queues

        '''python
        from django_fdbqueue import service
        from django_fdbqueue.connection import get_database

        db = get_database()
        assert service.list_queues(db).items == []
        service.create_queue(db, "jobs")
        service.push(db, "jobs", {"n": 1})
        '''

        Some prose, then a block that is not run:

        '''bash
        pip install django-fdbqueue
        '''

        '''python
        assert service.pop(db, "jobs").value == {"n": 1}
        '''

        '''console
        $ python manage.py fdbqueue list
        ...jobs...
        '''
        """,
    )
    assert run_page(path, tmp_path / "project") == 3


def test_page_code_may_define_dataclasses_and_use_future_imports(fdbqueue_store, tmp_path):
    path = page(
        tmp_path,
        """\
        '''python
        from __future__ import annotations
        from dataclasses import dataclass

        @dataclass
        class Job:
            name: str
        '''

        '''python
        assert Job("x").name == "x"
        '''
        """,
    )
    run_page(path, tmp_path / "project")


def test_a_failing_python_block_names_the_page_line_and_shows_the_traceback(fdbqueue_store, tmp_path):
    message = fails(
        tmp_path,
        """\
        '''python
        x = 1
        '''

        '''python
        y = x + 1
        assert y == 3, "y is not 3"
        '''
        """,
    )
    assert "page.md, line 5: the ```python block raised" in message
    assert 'page.md", line 7' in message  # the frame of the page's own line
    assert "AssertionError: y is not 3" in message


def test_a_settings_block_with_a_bad_fdbqueue_fails_with_the_check_message(fdbqueue_store, tmp_path):
    message = fails(
        tmp_path,
        """\
        '''python
        # settings.py
        FDBQUEUE = {"ENGINE": "embeded", "TIMEOUT": -1}
        '''
        """,
    )
    assert "page.md, line 1: the settings snippet does not pass the app's checks" in message
    assert "fdbqueue.E002: Unknown FDBQUEUE['ENGINE'] 'embeded'" in message
    assert "fdbqueue.E006" in message


def test_a_good_settings_block_passes_and_its_settings_apply_to_later_blocks(fdbqueue_store, tmp_path):
    path = page(
        tmp_path,
        """\
        '''python
        # settings.py
        INSTALLED_APPS += ["rest_framework", "django_fdbqueue"]
        FDBQUEUE = {"ENGINE": "foundationdb", "CLUSTER_FILE": "/etc/foundationdb/fdb.cluster", "TIMEOUT": 2.5}
        TASKS = {"default": {"BACKEND": "django_fdbqueue.tasks.FDBQueueBackend", "QUEUES": ["default"]}}
        '''

        '''python
        from django.conf import settings
        assert settings.FDBQUEUE["TIMEOUT"] == 2.5
        assert settings.FDBQUEUE["ENGINE"] != "foundationdb" or "fdbqueue-test" in settings.FDBQUEUE["ROOT"]
        assert settings.TASKS["default"]["QUEUES"] == ["default"]
        '''
        """,
    )
    run_page(path, tmp_path / "project")


def test_a_settings_block_with_a_bad_tasks_option_or_app_fails(fdbqueue_store, tmp_path):
    message = fails(
        tmp_path,
        """\
        '''python
        # settings.py
        INSTALLED_APPS += ["django_fdbqueu"]
        TASKS = {"default": {"BACKEND": "django_fdbqueue.tasks.FDBQueueBackend", "OPTIONS": {"LEASE": 0}}}
        '''
        """,
    )
    assert "INSTALLED_APPS entry 'django_fdbqueu' cannot be imported" in message
    assert "LEASE must be a number of seconds above 0" in message


def test_a_urls_block_is_resolved(fdbqueue_store, tmp_path):
    path = page(
        tmp_path,
        """\
        '''python
        # urls.py
        from django.urls import include
        urlpatterns += [path("queues-api/", include("django_fdbqueue.api.urls"))]
        '''

        '''console
        $ curl -s -i http://127.0.0.1:8000/queues-api/queues/
        HTTP/1.1 40... ...
        ...
        '''
        """,
    )
    run_page(path, tmp_path / "project")
    message = fails(
        tmp_path,
        """\
        '''python
        # urls.py
        from django.urls import include
        urlpatterns += [path("api/", include("django_fdbqueue.no_such_urls"))]
        '''
        """,
    )
    assert "No module named 'django_fdbqueue.no_such_urls'" in message


def test_a_console_block_with_other_output_fails_showing_expected_and_actual(fdbqueue_store, tmp_path):
    message = fails(
        tmp_path,
        """\
        '''console
        $ python manage.py fdbqueue create jobs
        ...
        $ python manage.py fdbqueue list
        nothing like this
        '''
        """,
    )
    assert "page.md, line 4: `$ python manage.py fdbqueue list` printed other output" in message
    assert "Expected:\n    nothing like this\nGot:\n" in message
    assert "jobs" in message.split("Got:")[1]


def test_a_failing_command_fails_unless_the_page_shows_its_error(fdbqueue_store, tmp_path):
    message = fails(
        tmp_path,
        """\
        '''console
        $ python manage.py fdbqueue pop no-such-queue
        ...
        '''
        """,
    )
    assert "failed with exit status" in message and "shows no error" in message
    path = page(
        tmp_path,
        """\
        '''console
        $ python manage.py fdbqueue nonsense
        ...invalid choice: 'nonsense'...
        '''
        """,
    )
    run_page(path, tmp_path / "project")


@pytest.mark.parametrize(
    "expected, actual, same",
    [
        ("a ... c", "a b c", True),
        ("start\n...\nend", "start\nline 1\nline 2\nend", True),
        ('{"id": "...", "n": 1}', '{"id": "FQczAAZ", "n": 1}', True),
        ("trailing   \n\n", "trailing", True),
        ("start\n...\nend", "start\nend", True),  # a line of its own: any number of lines, none too
        ("a ...\nz", "a b\nc\nz", True),  # within a line: any text, across lines too
        ("NAME   SIZE\njobs   2", "NAME  SIZE\njobs  2", True),  # column widths follow hidden cells
        ("a ... c", "a b d", False),
        ("exact", "exact and more", False),
        ("start\n...\nend", "start\nmiddle", False),
    ],
)
def test_ellipsis_matches_any_text_within_or_across_lines(expected, actual, same):
    assert matches(expected, actual) is same


def test_ellipsis_in_a_page(fdbqueue_store, tmp_path):
    path = page(
        tmp_path,
        """\
        '''console
        $ curl -s -X POST -H 'Content-Type: application/json' -d '{"value": 1}' http://h/api/queues/jobs/push/
        {"detail":"...","code":"not_authenticated"}
        '''
        """,
    )
    run_page(path, tmp_path / "project")


def test_a_module_block_is_importable_by_later_blocks_and_gone_after_the_page(fdbqueue_store, tmp_path):
    path = page(
        tmp_path,
        """\
        '''python
        # myapp/handlers.py
        def double(item):
            return item * 2
        '''

        '''python
        from myapp.handlers import double
        assert double(21) == 42
        '''
        """,
    )
    run_page(path, tmp_path / "project")
    assert "myapp" not in sys.modules and "myapp.handlers" not in sys.modules


def test_shell_variables_and_curl(fdbqueue_store, tmp_path):
    from django.contrib.auth.models import User

    from django_fdbqueue.models import QueueGrant

    reader = User.objects.create_user("reader", password="pw")
    QueueGrant.objects.create(user=reader, pattern="jobs", actions="view,consume")
    path = page(
        tmp_path,
        """\
        '''console
        $ python manage.py fdbqueue create jobs
        ...
        $ python manage.py fdbqueue push jobs '"hello"'
        ...
        $ CREDENTIALS=reader:pw
        $ curl -s -u "$CREDENTIALS" -X POST \\
            http://127.0.0.1:8000/api/queues/jobs/pop/
        {"id":"...","priority":0,"value":"hello",...}
        '''
        """,
    )
    run_page(path, tmp_path / "project")


@pytest.mark.parametrize(
    "block, complaint",
    [
        ("'''console\n$ pip install django-fdbqueue\n'''\n", "use ```bash"[4:]),
        ("'''console\n$ python manage.py runserver\n'''\n", "runs until it is stopped"),
        ("'''console\n$ curl -s http://h/api/queues/ | jq .\n'''\n", "shell operators"),
        ("'''\nno language\n'''\n", "a fenced block with no language"),
        ("'''sh\nls\n'''\n", "a ```sh block is neither run"),
        ("'''console\noutput without a command\n'''\n", "starts with a command"),
    ],
)
def test_what_cannot_run_fails_with_a_message_saying_what_to_do(fdbqueue_store, tmp_path, block, complaint):
    assert complaint in fails(tmp_path, block)


def test_pages_opt_out_by_front_matter_or_comment():
    assert opted_out("---\ntitle: x\nsnippets: skip\n---\n# Page\n")
    assert opted_out("# Page\n<!-- snippets: skip: shows a cluster only -->\n")
    assert not opted_out("# Page\nWe never skip snippets: skip them? no.\n")
    assert not opted_out("---\ntitle: x\n---\nsnippets: skip is how a page opts out\n")
