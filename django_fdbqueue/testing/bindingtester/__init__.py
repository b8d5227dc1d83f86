"""FoundationDB's binding tester run against the embedded engine, and compared with a cluster.

The binding tester (a driver that writes seeded instructions into the database, and a
stack-machine tester per language binding that runs them) is FoundationDB's own judge of a
binding. It is not part of this package: the runner finds it through ``--tester-dir`` or
``FDB_HOME``. What is ours:

* ``shim``: a stand-in ``fdb`` module that presents the embedded engine with the official
  binding's names, so the unchanged driver and Python tester run on it.
* ``launch``: runs one of their scripts with the stand-in in place (``python -m ... SCRIPT``).
* ``runs``: one run of the driver against one database, in processes of its own.
* ``results``: reading what a run left in its database, and comparing two runs entry by entry.
* ``command``: the command line (``python -m django_fdbqueue.testing.bindingtester``).

How to run it, and which seeds have been run: docs/howto/binding-tester.md.
"""

#: The environment variable that chooses the engine of the scripts ``launch`` runs.
ENGINE_ENV = "FDBQUEUE_BINDINGTESTER_ENGINE"
EMBEDDED = "embedded"
