"""The re-introduced defects of ``tests/simulation_defects``: they still apply, and the simulator still catches them.

Every patch must apply cleanly to the code as it is now (``patch --dry-run -p1``), or the bench
``benchmarks/simulation_defects.py`` measures nothing. Three representative ones, each broken a
different way and quick to catch, are applied to a copy of the package and run through
``manage.py fdbqueue simulate`` in a process of its own: each must be caught within the seeds
the bench recorded for it (``docs/_static/figures/simulation-defects.json``). Every process is
bounded by a timeout.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks import simulation_defects as bench

pytestmark = pytest.mark.timeout(300)

PATCHES = sorted(bench.PATCHES.glob("*.patch"))
#: Quick to catch, and each caught by a different oracle: a lost item (ack in doubt), counters
#: against a recount (two pops of one item), liveness (a waiter asleep beside an item).
REPRESENTATIVE = ["03-ack-in-doubt-not-answered-from-marker", "m01-pop-head-read-snapshot", "m04-push-wakes-nobody"]
#: Seconds one patch's simulation may run.
RUN_MINUTES = 3.0


def recorded() -> dict[str, dict]:
    report = json.loads(bench.FIGURE.read_text())
    return {r["patch"]: r for r in report["results"]}


def test_there_are_defects_from_every_wave_and_mutations_of_our_own():
    names = [p.stem for p in PATCHES]
    defects = [n for n in names if not n.startswith("m")]
    mutations = [n for n in names if n.startswith("m")]
    assert len(defects) >= 15 and len(mutations) >= 5
    headers = " ".join(bench.header(p) for p in PATCHES if not p.stem.startswith("m"))
    for wave in ("wave 1", "wave 2", "wave 3", "wave 4"):
        assert wave in headers


@pytest.mark.parametrize("patch", PATCHES, ids=[p.stem for p in PATCHES])
def test_the_patch_applies_to_the_code_as_it_is(patch: Path):
    assert bench.header(patch), "each patch starts with a header saying what it re-introduces"
    done = subprocess.run(
        ["patch", "--dry-run", "-p1", "-i", str(patch)],
        cwd=bench.PACKAGE.parent,
        capture_output=True,
        text=True,
        timeout=bench.PATCH_SECONDS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fuzz" not in done.stdout.lower(), done.stdout  # moved lines are fine, changed context is not


def test_every_patch_has_a_recorded_result():
    assert set(recorded()) == {p.stem for p in PATCHES}


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_the_simulator_catches_it_within_its_recorded_seeds(name: str, tmp_path: Path):
    result = recorded()[name]
    assert result["caught"], f"{name} was not caught when the bench last ran"
    first = json.loads(bench.FIGURE.read_text())["first_seed"]
    bench.prepare(tmp_path, bench.PATCHES / f"{name}.patch")
    summary = bench.simulate(tmp_path, result["seeds"], first, RUN_MINUTES)
    assert summary["failed_seed"] is not None, f"{name} survived {summary['seeds']} seeds"
    assert summary["seeds"] <= result["seeds"]
    assert summary["violations"]
