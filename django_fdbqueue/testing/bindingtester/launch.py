"""Run one of the binding tester's scripts as ``python SCRIPT ARGS...`` would, on the chosen engine.

``python -m django_fdbqueue.testing.bindingtester.launch SCRIPT ARGS...``: with
``$FDBQUEUE_BINDINGTESTER_ENGINE`` set to ``embedded`` the stand-in ``fdb`` module is installed
first (``shim``); otherwise the official binding is imported as usual. The driver starts its
testers as ``python tester.py ...``: the runner puts a ``python`` first on their PATH that
comes back here, so the testers get the same engine as the driver.
"""

from __future__ import annotations

import os
import runpy
import sys

from . import EMBEDDED, ENGINE_ENV


def main(argv: list[str]) -> None:
    """Run ``argv[0]`` as the main script, with ``argv[1:]`` as its arguments."""
    if not argv:
        raise SystemExit("usage: python -m django_fdbqueue.testing.bindingtester.launch SCRIPT [ARGS...]")
    if os.environ.get(ENGINE_ENV) == EMBEDDED:
        from .shim import install  # only then: the cluster's side imports nothing of the engine

        install()
    script = os.path.abspath(argv[0])
    sys.argv = [script, *argv[1:]]
    sys.path[0] = os.path.dirname(script)  # as for `python SCRIPT`: its folder first
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
