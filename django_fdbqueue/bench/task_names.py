"""Where the bench's tasks rows run, named once for the rows (``task_rows``) and the task (``tasks``).

A module of its own because ``tasks`` creates its Task at import, which the rows may only allow
once the framework is there and the bench's backend exists.
"""

#: The TASKS alias the bench adds for its run, for the rows of ours.
BACKEND_ALIAS = "fdbqueue-bench"
#: The task queue name (results are listed under it); our queue is the backend's prefix + it.
QUEUE_NAME = "fdbqueue-bench"
#: The mode of our tasks row that enqueues every task before its one worker starts, as the
#: database backend's row does: the Tasks goal's like-for-like row. The other rows of ours
#: ("threads") enqueue while their workers run.
ENQUEUED_FIRST = "enqueued first"
#: The target name of the Tasks goal's reference row: django-tasks' database backend, measured by
#: the project's benchmarks beside the app (see ``references``).
TASKS_DB = "django-tasks-db"
