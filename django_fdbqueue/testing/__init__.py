"""Test helpers for projects that use django-fdbqueue (and for its own suite).

* ``binaries``: find FoundationDB's programs and client library (``FDB_HOME``, ``PATH``, packages).
* ``cluster``: a throwaway local cluster (``LocalCluster``; ``scripts/fdb-cluster`` from a shell).
* ``plugin``: pytest fixtures that give a test a fresh queue store on either engine.
"""
