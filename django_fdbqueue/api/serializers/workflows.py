"""Serializers of the workflows routes: the list's query, a workflow's header, its nodes.

They describe what ``tasks.workflows.as_data`` and ``node_data`` return, for the OpenAPI
document and the browsable API; the views answer with that data as it is.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from .fields import CursorField, QueryIntegerField
from .limits import DEFAULT_LIMIT, MAX_LIMIT
from .pages import PageSerializer

#: Kept here so the schema does not import the Tasks framework: ``tasks.workflows.STATUSES``.
STATUSES = ("STORING", "RUNNING", "SUCCESSFUL", "FAILED", "CANCELLED")
NODE_STATES = ("WAITING", "READY", "RUNNING", "SUCCESSFUL", "FAILED", "CANCELLED", "FORGOTTEN")
DEFAULT_STATUS = "RUNNING"
DEFAULT_BACKEND = "default"


class WorkflowListQuerySerializer(serializers.Serializer[Any]):
    """?status=, ?backend=, ?cursor= and ?limit= of the workflow list."""

    status = serializers.ChoiceField(
        choices=STATUSES, required=False, default=DEFAULT_STATUS, help_text="Which status to list."
    )
    backend = serializers.CharField(
        required=False, default=DEFAULT_BACKEND, max_length=200, help_text="The TASKS alias."
    )
    cursor = CursorField(required=False, default=None, allow_null=True, help_text="From a page's next link.")
    limit = QueryIntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Page size."
    )


class WorkflowBackendQuerySerializer(serializers.Serializer[Any]):
    """?backend= of one workflow: the TASKS alias it was enqueued on."""

    backend = serializers.CharField(
        required=False, default=DEFAULT_BACKEND, max_length=200, help_text="The TASKS alias."
    )


class WorkflowNodesQuerySerializer(WorkflowBackendQuerySerializer):
    """?backend=, ?after= and ?limit= of one workflow: which backend, and which page of its nodes."""

    after = serializers.IntegerField(
        required=False, default=None, allow_null=True, min_value=0, help_text="Nodes after this index."
    )
    limit = QueryIntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Nodes per page."
    )


class WorkflowSerializer(serializers.Serializer[Any]):
    """A workflow's header: its status and member counts."""

    id = serializers.CharField()
    backend = serializers.CharField(help_text="The TASKS alias it was enqueued on.")
    name = serializers.CharField(allow_blank=True)
    # CharFields, not ChoiceFields: other components have a "status" of other values (one enum each).
    status = serializers.CharField(help_text=f"One of {', '.join(STATUSES)}.")
    on_failure = serializers.CharField(help_text='"fail" or "continue".')
    size = serializers.IntegerField(help_text="How many nodes (members).")
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.DictField(help_text="Why it FAILED or was CANCELLED; empty otherwise.")


class WorkflowNodeSerializer(serializers.Serializer[Any]):
    """One node: its member's task, state and attempts."""

    index = serializers.IntegerField()
    result_id = serializers.CharField(help_text="The member's task result id.")
    task_path = serializers.CharField(allow_null=True, help_text="Null once the result is forgotten.")
    state = serializers.CharField(help_text=f"One of {', '.join(NODE_STATES)}.")
    attempts = serializers.IntegerField()
    predecessors = serializers.IntegerField(help_text="How many nodes it waits on.")


class WorkflowDetailSerializer(WorkflowSerializer):
    """A workflow with a page of its nodes."""

    nodes = WorkflowNodeSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="The next page of nodes, or null on the last one.")


# A page object, not a list, even on the list action.
@extend_schema_serializer(many=False)
class WorkflowPageSerializer(PageSerializer):
    results = WorkflowSerializer(many=True)
