"""The backup guide's restore commands (docs/howto/backup.md, ``<!-- docs-test: restore -->``),
run as a script with ``set -e`` in a store's folder once every process has closed the store:
as the guide says, SQLite has removed the ``-wal`` and ``-shm`` files by then."""

from __future__ import annotations

import shlex
import subprocess

from django.test import override_settings

from django_fdbqueue import service
from django_fdbqueue.connection import get_database, reset_database
from tests.doc_blocks import REPO, marked_blocks

SHOWN_FOLDER = "/srv/myapp/"


def test_the_restore_commands_run_after_every_process_closed_the_store(tmp_path):
    store = tmp_path / "fdbqueue.sqlite3"
    with override_settings(FDBQUEUE={"ENGINE": "embedded", "PATH": store}):
        service.create_queue(get_database(), "restored")
        reset_database()  # the last process closes the store
    assert store.is_file() and not (tmp_path / "fdbqueue.sqlite3-wal").exists()
    backup = tmp_path / "backup.sqlite3"
    backup.write_bytes(store.read_bytes())

    lines = marked_blocks(REPO / "docs" / "howto" / "backup.md")["restore"].body.splitlines()
    assert lines[0] == f"cd {SHOWN_FOLDER}", lines[0]
    (copy,) = [line for line in lines if line.startswith("cp ")]
    script = "\n".join(
        ["set -e", f"cd {shlex.quote(str(tmp_path))}"]
        + [
            line.replace(copy.split()[1], shlex.quote(str(backup))) if line == copy else line
            for line in lines[1:]
            if not line.startswith("python manage.py")  # the check: the test reads the store itself
        ]
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "before-restore" / "fdbqueue.sqlite3").is_file()
    with override_settings(FDBQUEUE={"ENGINE": "embedded", "PATH": store}):
        assert [queue.name for queue in service.list_queues(get_database()).items] == ["restored"]
        reset_database()
