"""The workflows routes: list (by status, paged), retrieve (the header and a page of nodes), cancel.

Thin over ``django_fdbqueue.tasks.workflows``. A workflow is its members' task queues'
(``QUEUE_PREFIX + queue_name`` of each member): ``view`` on every one of them shows it, ``consume``
on every one of them cancels it (as retrying a task in the admin needs ``consume`` on its queue).
One the user may not view answers as a missing one does (404 ``workflow_not_found``); one the
user may view but not cancel is a 403 naming the action. The list shows only the workflows the
user may view; its cursor is sealed (``access.listing``), like every cursor of the API.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from django_fdbqueue.access import QueueAccessDenied, listing
from django_fdbqueue.exceptions import InvalidCursor

from .access import may_on_queues, require_on_queues
from .exceptions import WorkflowNotFound
from .policy import AppViewSet
from .serializers import ErrorSerializer, UnavailableErrorSerializer, ValidationErrorSerializer
from .serializers.workflows import (
    WorkflowBackendQuerySerializer,
    WorkflowDetailSerializer,
    WorkflowListQuerySerializer,
    WorkflowNodesQuerySerializer,
    WorkflowPageSerializer,
    WorkflowSerializer,
)

_ERRORS = {
    400: (ValidationErrorSerializer, "Invalid query: an unknown status, a bad cursor or limit."),
    401: (ErrorSerializer, "Not authenticated."),
    403: (ErrorSerializer, "Not allowed: the action is missing on one of the workflow's task queues."),
    404: (ErrorSerializer, "No such workflow (or one whose task queues you may not view)."),
    503: (UnavailableErrorSerializer, "The database is unavailable or timed out; retry later."),
}
_ID = OpenApiParameter(
    "id", str, OpenApiParameter.PATH, required=True, pattern=r"^[^/]+$", description="The workflow's id."
)
_RETRY_AFTER = OpenApiParameter(
    "Retry-After", int, OpenApiParameter.HEADER, response=[503], description="Seconds to wait before retrying."
)

F = TypeVar("F", bound=Callable[..., Any])


def _schema(summary: str, success: dict[int, Any], errors: tuple[int, ...], **kwargs: Any) -> Callable[[F], F]:
    responses = {
        code: OpenApiResponse(_ERRORS[code][0], description=_ERRORS[code][1])
        for code in sorted({*errors, 401, 403, 503})
    }
    parameters = [*kwargs.pop("parameters", []), _RETRY_AFTER]
    return extend_schema(
        summary=summary, responses={**success, **responses}, parameters=parameters, tags=["workflows"], **kwargs
    )


@contextmanager
def _found(workflow_id: str) -> Iterator[None]:
    """The workflows' own errors as the API's: an unknown id 404, a bad query 400."""
    from django_fdbqueue.tasks.exceptions import InvalidWorkflow, WorkflowDoesNotExist

    try:
        yield
    except WorkflowDoesNotExist:
        raise WorkflowNotFound(f"No workflow {workflow_id!r}.") from None
    except InvalidWorkflow as error:
        raise exceptions.ValidationError({"detail": [str(error.args[0] if error.args else error)]}) from None


class WorkflowViewSet(AppViewSet):
    """Workflows of the Tasks backends: chains, groups, chords and DAGs of tasks."""

    lookup_field = "id"

    @staticmethod
    def _query(serializer_class: type, request: Request) -> dict[str, Any]:
        serializer = serializer_class(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def _workflow(self, request: Request, workflow_id: str, backend: str, action_name: str) -> Any:
        """The workflow (404 if none, or if the user may not view it), once ``action_name`` on
        every one of its task queues is allowed."""
        from django_fdbqueue.tasks.workflows import get_workflow

        with _found(workflow_id):
            workflow = get_workflow(workflow_id, backend=backend)
        try:
            require_on_queues(request, action_name, workflow.queues(), "workflow")
        except QueueAccessDenied as refused:
            if refused.visible:
                raise
            raise WorkflowNotFound(f"No workflow {workflow_id!r}.") from None
        return workflow

    @_schema(
        "List workflows in one status",
        {200: OpenApiResponse(WorkflowPageSerializer, description="A page of workflows, oldest first.")},
        (400,),
        parameters=[WorkflowListQuerySerializer],
    )
    def list(self, request: Request) -> Response:
        from django_fdbqueue.tasks.workflows import as_data, list_workflows

        query = self._query(WorkflowListQuerySerializer, request)
        sees_all = may_on_queues(request, "view", set())
        cursor = listing.unseal(query["cursor"])
        if query["cursor"] is not None and cursor == query["cursor"]:  # every page's cursor is sealed
            raise InvalidCursor()
        from django_fdbqueue.tasks.exceptions import InvalidWorkflow

        try:
            page = list_workflows(query["status"], backend=query["backend"], after=cursor, limit=query["limit"])
        except InvalidWorkflow as error:  # the query was checked above: only the opaque cursor is left
            raise InvalidCursor(str(error.args[0] if error.args else error)) from None
        shown = page.items if sees_all else [w for w in page.items if may_on_queues(request, "view", w.queues())]
        next_cursor = None if page.next is None else listing.seal(page.next)
        next_url = None
        if next_cursor is not None:
            next_url = replace_query_param(request.build_absolute_uri(), "cursor", next_cursor)
        return Response({"next": next_url, "results": [as_data(w) for w in shown]})

    @_schema(
        "Show a workflow and a page of its nodes",
        {200: WorkflowDetailSerializer},
        (400, 404),
        parameters=[_ID, WorkflowNodesQuerySerializer],
    )
    def retrieve(self, request: Request, id: str) -> Response:
        from django_fdbqueue.tasks.workflows import as_data, node_data

        query = self._query(WorkflowNodesQuerySerializer, request)
        workflow = self._workflow(request, id, query["backend"], "view")
        with _found(id):
            nodes = workflow.nodes(after=query["after"], limit=query["limit"])
        last = nodes[-1].index if nodes else None
        next_url = None
        if last is not None and last + 1 < workflow.size and len(nodes) == query["limit"]:
            next_url = replace_query_param(request.build_absolute_uri(), "after", str(last))
        return Response({**as_data(workflow), "nodes": [node_data(n) for n in nodes], "next": next_url})

    @_schema(
        "Cancel a workflow: members not started never run",
        {200: WorkflowSerializer},
        (400, 404),
        parameters=[_ID, WorkflowBackendQuerySerializer],
        request=None,
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, id: str) -> Response:
        from django_fdbqueue.tasks.workflows import as_data, cancel_workflow

        backend = self._query(WorkflowBackendQuerySerializer, request)["backend"]
        self._workflow(request, id, backend, "consume")
        with _found(id):
            workflow = cancel_workflow(id, backend=backend)
        return Response(as_data(workflow))


__all__ = ["WorkflowViewSet"]
