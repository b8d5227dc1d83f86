"""FoundationDB's binding tester on the embedded engine, and compared with a cluster: a few fresh seeds.

The long runs are the command's (docs/howto/binding-tester.md); here each test takes new seeds
every run, printed (and named in a failure) so that a failing one can be run again with
``--seed``. The binding tester is found through ``$FDBQUEUE_BINDING_TESTER`` or ``$FDB_HOME``;
without it the tests are skipped, and fail under ``FDBQUEUE_TEST_CLUSTER=require`` (CI), as the
cluster tests do. The comparison starts a throwaway cluster of its own: the driver clears the
whole database before each test, which the suite's shared cluster must not suffer.
"""

from __future__ import annotations

import os

import pytest

from django_fdbqueue.testing import plugin
from django_fdbqueue.testing.bindingtester.command import cluster_target, fresh_seeds, run_seeds, summary
from django_fdbqueue.testing.bindingtester import runs

#: (test, concurrency, seeds) compared with a cluster: a slice that stays near a minute on a 2-core
#: machine. On the embedded engine alone (which the comparison runs too), one seed of each.
SLICE = [("api", 1, 2), ("api", 3, 1), ("directory", 1, 2), ("directory_hca", 3, 1)]
ALONE = [(test, concurrency, 1) for test, concurrency, _count in SLICE]
TIMEOUT = 240.0


@pytest.fixture(scope="module")
def tester_root():
    try:
        return runs.find_tester()
    except runs.TesterNotFound as error:
        if os.environ.get(plugin.ENV_MODE) == "require":
            pytest.fail(str(error), pytrace=False)
        pytest.skip(str(error))


def _plans(test: str, concurrency: int, count: int) -> list[runs.Plan]:
    seeds = fresh_seeds(count)
    print(f"binding tester {test} (concurrency {concurrency}): seeds {seeds}")
    return [runs.Plan(test, seed, 100, concurrency, timeout=TIMEOUT) for seed in seeds]


def _check(test: str, concurrency: int, outcomes) -> None:
    failed = [outcome for outcome in outcomes if not outcome.passed]
    report = "\n".join(f"seed {o.seed}: {o.verdict}\n{o.detail}" for o in failed)
    assert not failed, f"{summary(test, concurrency, outcomes)} (run again with --seed):\n{report}"


@pytest.mark.parametrize(("test", "concurrency", "count"), ALONE)
def test_the_binding_tester_completes_on_the_embedded_engine(tester_root, test, concurrency, count):
    """The driver and the Python tester run on the embedded engine, and the driver's own checks
    (versionstamps, the directory layer's allocator) pass."""
    outcomes = run_seeds(tester_root, _plans(test, concurrency, count), None)
    _check(test, concurrency, outcomes)


@pytest.fixture(scope="module")
def cluster(tester_root):
    plugin.need_cluster()  # skipped, or failed under require, where the suite has no cluster
    with cluster_target(None) as target:
        yield target


@pytest.mark.cluster
@pytest.mark.parametrize(("test", "concurrency", "count"), SLICE)
def test_the_binding_tester_gives_the_clusters_results(cluster, tester_root, test, concurrency, count):
    """The same seeds on a cluster: the results match entry by entry (with concurrent testers,
    which stack entries were logged)."""
    outcomes = run_seeds(tester_root, _plans(test, concurrency, count), cluster)
    _check(test, concurrency, outcomes)
