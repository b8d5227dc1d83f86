"""The project's references for ``manage.py fdbqueue bench``: a private Redis, a raw SQLite table
and django-tasks' database backend, measured beside the app's queues in the same run.

Not part of the app, nor of its wheel: they serve the project's figures and goals (the docs'
performance page, ``scripts/docs-figures``, the bench's tests), so they stay in the repository,
beside ``django_fdbqueue/``. The bench reaches them through its hook,
:mod:`django_fdbqueue.bench.references`, which imports :mod:`benchmarks.references`. These modules
import the app; the app imports none of them.

* ``references``: what the hook calls: checking and starting a ``--compare`` reference, and the
  Tasks goal's reference;
* ``redis_ref`` and ``sqlite_ref``: the Redis and raw SQLite targets (the bench's ``Target``);
* ``directory``: a scratch directory beside the embedded store (the same disk);
* ``tasks_db_ref``, ``tasks_db_child`` and ``tasks_db_settings``: django-tasks' database backend on
  SQLite, measured in a process of its own with its own settings.
"""
