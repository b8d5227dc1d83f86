"""The workflows gauge: ``fdbqueue_workflows{backend, status}`` follows the store at each scrape."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from django_fdbqueue.metrics.workflows import WorkflowCollector
from django_fdbqueue.tasks.workflows import call, cancel_workflow, chain, group

from . import workflow_tasks as wt
from .api_helpers import api, user  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def workflows(client) -> dict[str, float]:
    response = client.get("/metrics/")
    assert response.status_code == 200, response.content
    return {
        sample.labels["status"]: sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
        if sample.name == "fdbqueue_workflows" and sample.labels["backend"] == "default"
    }


def test_workflows_are_counted_by_status(api, fdbqueue_db):  # noqa: F811
    assert workflows(api) == dict.fromkeys(("STORING", "RUNNING", "SUCCESSFUL", "FAILED", "CANCELLED"), 0)
    first = chain(call(wt.double, 1), call(wt.double, 2)).enqueue()
    group(call(wt.double, 3)).enqueue()
    assert workflows(api)["RUNNING"] == 2
    cancel_workflow(first.id)
    counts = workflows(api)
    assert (counts["RUNNING"], counts["CANCELLED"]) == (1, 1)


def test_an_unreadable_store_leaves_the_samples_out(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise OSError("no store")

    monkeypatch.setattr("django_fdbqueue.tasks.workflows.workflow_counts", broken)
    (family,) = WorkflowCollector().collect()
    assert family.samples == [] and "could not read the workflows" in caplog.text
    (described,) = WorkflowCollector().describe()
    assert described.name == "fdbqueue_workflows" and described.samples == []
