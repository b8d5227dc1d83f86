"""scripts/profile-push-pop.py: the summary it prints from a sampling profile's raw stacks.

The profile itself needs py-spy and takes half a minute, so it is not run here; its arithmetic
is (the docs' performance page publishes what it prints).
"""

from __future__ import annotations

import importlib.util
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "scripts" / "profile-push-pop.py"


def _script():
    spec = importlib.util.spec_from_file_location("profile_push_pop", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stack(*frames: str) -> str:
    return ";".join(frames)


def test_the_summary_counts_only_the_loop_and_sums_by_layer(tmp_path):
    script = _script()
    loop = "push_pop_loop (scripts/profile-push-pop.py:60)"
    raw = tmp_path / "profile.raw"
    raw.write_text(
        "\n".join(
            [
                _stack("<module> (x.py:1)", loop, "Storage.commit (pkg/django_fdbqueue/engines/embedded/storage.py:10)")
                + " 6",
                _stack(
                    "<module> (x.py:1)",
                    loop,
                    "WriteCache.apply (pkg/django_fdbqueue/engines/embedded/write_cache.py:3)",
                )
                + " 2",
                _stack("<module> (x.py:1)", loop, "_encode (site/fdb/tuple.py:374)") + " 1",
                _stack("<module> (x.py:1)", loop, "take (pkg/django_fdbqueue/service/_internals/items.py:409)") + " 1",
                _stack(
                    "<module> (x.py:1)",
                    "setup (x.py:5)",
                    "Storage.commit (pkg/django_fdbqueue/engines/embedded/storage.py:10)",
                )
                + " 50",
            ]
        )
        + "\n"
    )
    text = script.summary(str(raw), "1,234", top=3)
    assert "push+pop pairs/s, unprofiled: 1,234" in text
    assert "samples in the loop: 10" in text  # the setup's 50 samples are not the loop's
    assert "60.0%  SQLite" in text
    assert "20.0%  engine, Python" in text
    assert "10.0%  tuple layer" in text and "10.0%  service" in text
    top = text.split("Top 3 functions (self time):\n", 1)[1].splitlines()
    assert top[0].strip() == "60.0%  Storage.commit (django_fdbqueue/engines/embedded/storage.py)"
    assert len(top) == 3


def test_without_py_spy_the_script_says_how_to_get_it(monkeypatch, capsys):
    script = _script()
    monkeypatch.setattr(script.shutil, "which", lambda *args, **kwargs: None)
    monkeypatch.setattr("sys.argv", ["profile-push-pop.py"])
    assert script.main() == 2
    assert "pip install py-spy" in capsys.readouterr().err
