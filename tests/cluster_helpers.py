"""What the fault tests on a real cluster share: FoundationDB's binaries or a skip, a child
process whose client injects faults, and clients whose wall clocks disagree.

Kept apart from the tests so that spawned children import only this (and the app), not a test
module with its fixtures.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Iterator

import pytest

from django_fdbqueue.testing import binaries, plugin


def need_binaries() -> binaries.Binaries:
    """FoundationDB's binaries, or skip (fail when cluster runs are required) with the reason."""
    try:
        return binaries.find(need_library=True)
    except binaries.BinariesNotFound as error:
        if os.environ.get(plugin.ENV_MODE) == "require":
            pytest.fail(str(error), pytrace=False)
        pytest.skip(str(error))


# -- commit_unknown_result on a real cluster ---------------------------------------------------


def buggified_pushes(fdbqueue_setting: dict, queue: str, keys: list[str], fired_percent: int, results: Any) -> None:
    """A spawned child: push one item per dedup key through a client whose commits misbehave.

    FoundationDB's client has fault injection of its own ("client buggify", network options set
    before the network starts): among other faults, commits report ``commit_unknown_result``
    (1021) whether or not they happened, and commits time out (1031) while they go on in flight.
    Every push that raises is retried with its key, as an application must. Sends back what it
    saw: the errors the service retried (by code), the errors raised to it, the items' ids.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django_fdbqueue.conf import DEFAULT_API_VERSION
    from django_fdbqueue.engines.foundationdb import select_api_version

    fdb = select_api_version(fdbqueue_setting.get("API_VERSION", DEFAULT_API_VERSION))
    # Network options: they must be set before the network starts, so before the database opens.
    fdb.options.set_client_buggify_enable()
    fdb.options.set_client_buggify_section_activated_probability(100)
    fdb.options.set_client_buggify_section_fired_probability(fired_percent)
    from tests.processes import child_database

    db = child_database(fdbqueue_setting)
    from django_fdbqueue import service
    from django_fdbqueue.fdbapi import FDBError, retry_counts

    raised: dict[int, int] = {}
    ids: dict[str, list[str]] = {}
    for key in keys:
        for _attempt in range(50):
            try:
                item = service.push(db, queue, {"key": key}, dedup_key=key)
            except FDBError as error:
                raised[error.code] = raised.get(error.code, 0) + 1
                continue
            ids.setdefault(key, []).append(item.id)
            break
    results.put({"retried": retry_counts(), "raised": raised, "ids": ids})


# -- clients with skewed clocks -----------------------------------------------------------------


class SkewedClocks:
    """Each thread is a client with its own wall clock: ``with clocks.skewed(seconds):``.

    The service reads the time through ``now_micros`` in each of its modules (see
    ``tests/clock.py``); here that reads the real clock plus the calling thread's skew, so two
    threads of one test are two machines whose clocks disagree, sharing one store.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from tests.clock import Clock

        self._local = threading.local()
        for module in {*Clock.MODULES, *self._other_readers()}:
            real = module.now_micros
            monkeypatch.setattr(module, "now_micros", lambda real=real: real() + self.skew_us())

    @staticmethod
    def _other_readers() -> list[Any]:
        """Any other module of the app that imported ``now_micros`` (all must agree per client)."""
        return [
            module
            for name, module in list(sys.modules.items())
            if name.startswith("django_fdbqueue.") and callable(getattr(module, "now_micros", None))
        ]

    def skew_us(self) -> int:
        return getattr(self._local, "skew_us", 0)

    @contextlib.contextmanager
    def skewed(self, seconds: float) -> Iterator[None]:
        """The calling thread's clock runs ``seconds`` ahead (negative: behind) inside the block."""
        before = self.skew_us()
        self._local.skew_us = int(seconds * 1_000_000)
        try:
            yield
        finally:
            self._local.skew_us = before
