"""The names of the bench's tasks rows: their targets, modes and worker counts, its backend's alias
and queue.

The plan lays the rows out, the results relate them and the report prints them by these names;
the project's benchmarks measure them (``benchmarks/task_rows.py``) and run the task.
"""

#: The target name of the reference rows: the framework's ImmediateBackend, which runs each task inline.
IMMEDIATE = "immediate"
#: Worker threads of the rows of ours.
TASK_WORKERS = (1, 4, 16)
#: Worker threads of the rows that enqueue every task first, with exact and with spread claims.
ENQUEUED_FIRST_WORKERS = (1, 16)
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
