"""Workflows in the deterministic simulation (``testing.simulation.actors_workflows``): seeds of
the task workers and the workflow enqueuer alone break no invariant, replay step for step, and a
planted defect of the release or of the claim is reported as a "workflow" violation."""

from __future__ import annotations

import collections
import dataclasses

from django_fdbqueue.tasks.workflows import release
from django_fdbqueue.testing.simulation import Faults, Options, Shape, simulate

SHAPE = dataclasses.replace(Shape.none(operations=24), task_workers=2, workflows=1)


def _violations(seeds: range, faults: str = "default") -> list[str]:
    found = []
    for seed in seeds:
        result = simulate(seed, Options(faults=Faults.parse(faults), shape=SHAPE, swarm=False))
        found += [f"{seed} {v.kind}: {v.detail}" for v in result.violations]
    return found


def _kinds(seeds: range) -> collections.Counter[str]:
    return collections.Counter(line.split()[1].rstrip(":") for line in _violations(seeds))


def test_seeds_of_workflows_among_the_task_workers_break_no_invariant():
    assert _violations(range(6)) == []


def test_seeds_of_workflows_swarmed_with_the_knobs_break_no_invariant():
    for seed in range(6):
        result = simulate(seed, Options(shape=dataclasses.replace(SHAPE, task_workers=3)))
        assert result.violations == [], result.replay()


def test_a_workflow_seed_replays_its_run_step_for_step():
    first, second = (simulate(5, Options(shape=SHAPE, swarm=False)) for _ in range(2))
    assert first.trace == second.trace and first.digest() == second.digest()
    assert any("enqueue workflow" in line for line in first.trace)


def test_a_successor_released_before_its_last_predecessor_is_caught(monkeypatch):
    def arrive_complete(tr, space, index):
        """Every finish completes every successor: released at its first predecessor's finish."""
        return [space.unpack(bytes(kv.key))[2] for kv in tr.snapshot.get_range(*space.successors(index))]

    monkeypatch.setattr(release, "_arrive", arrive_complete)
    found = _violations(range(3), "none")
    assert any("workflow: " in line and "while its predecessor" in line for line in found), found


def test_a_successor_released_twice_is_caught(monkeypatch):
    def release_unguarded(tr, space, header, nodes):
        """The released mark not checked: each finish that completes a node pushes it again."""
        stored = [release.StoredNode.loads(bytes(tr[space.node(j)])) for j in nodes]
        for j in nodes:
            tr[space.state(j)] = release.RELEASED
        release.push_nodes(tr, stored, None)  # the run's, watched

    def arrive_always(tr, space, index):
        return [space.unpack(bytes(kv.key))[2] for kv in tr.snapshot.get_range(*space.successors(index))]

    monkeypatch.setattr(release, "_arrive", arrive_always)
    monkeypatch.setattr(release, "_release", release_unguarded)
    found = _violations(range(3), "none")
    assert any("released a second time" in line for line in found), found


def test_a_member_started_after_its_workflow_was_cancelled_is_caught(monkeypatch):
    monkeypatch.setattr(release, "admitted", lambda tr, record: True)
    found = _violations(range(6), "none")
    assert any("is started while it is CANCELLED" in line or "while it is FAILED" in line for line in found), found
