"""scripts/cpu-per-op.py: its table (medians, and ratios to the recipe's pop of the same round),
and a short run on the embedded engine when the recipe's page is at hand."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "cpu-per-op.py"


def _script():
    spec = importlib.util.spec_from_file_location("cpu_per_op", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_ratio_is_to_the_recipe_pop_of_the_same_round():
    script = _script()
    # Three rounds; the machine slowed down in the last one, which the ratios do not feel.
    rounds = {name: [[1.0, 0.5], [1.0, 0.5], [3.0, 1.5]] for name in script.OPERATIONS}
    rounds[script.RECIPE_POP] = [[0.5, 0.2], [0.5, 0.2], [1.5, 0.6]]
    rounds["push"] = [[0.4, 0.2], [0.6, 0.3], [1.5, 0.7]]
    text = script.table("embedded", rounds)
    lines = {line.split("  ")[1].strip(): line for line in text.splitlines()[2:]}
    assert text.splitlines()[0] == "embedded engine: medians of 3 rounds"
    assert lines["recipe pop"].split()[-3:] == ["0.500", "1.00x", "0.200"]
    assert lines["plain pop"].split()[-3:] == ["1.000", "2.00x", "0.500"]
    assert lines["push"].split()[-3:] == ["0.600", "1.00x", "0.300"]  # ratios 0.8, 1.2, 1.0


@pytest.mark.skipif(not os.environ.get("FDBQUEUE_BENCH_RECIPE"), reason="FDBQUEUE_BENCH_RECIPE names no recipe page")
def test_a_short_run_on_the_embedded_engine_prints_every_operation():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--engines", "embedded", "--ops", "20", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    script = _script()
    for name in script.OPERATIONS:
        assert f"  {name} " in done.stdout
