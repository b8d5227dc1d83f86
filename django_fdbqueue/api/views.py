"""The queue API's one viewset: parse with a serializer, call the service, shape the answer.

No queue rule lives here. Errors travel as exceptions to ``api.exceptions.exception_handler``,
which the viewset names itself so the mapping does not depend on the project's DRF settings.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from django_fdbqueue import service
from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import FDBError, transactional
from django_fdbqueue.paths import segment_to_name

from . import permissions
from .exceptions import DatabaseUnavailable, exception_handler
from .parsers import BoundedJSONParser
from .serializers import (
    QUEUE_NAME_REGEX,
    BrowseQuerySerializer,
    EndQuerySerializer,
    ErrorSerializer,
    ItemListSerializer,
    ItemPageSerializer,
    ItemSerializer,
    PushBatchSerializer,
    PushItemSerializer,
    PushSerializer,
    QueueCreateSerializer,
    QueueListQuerySerializer,
    QueuePageSerializer,
    QueueSerializer,
    UnavailableErrorSerializer,
    ValidationErrorSerializer,
)

logger = logging.getLogger("django_fdbqueue.api")

# ----------------------------------------------------------------------------- schema helpers

_ERROR_DESCRIPTIONS = {
    400: "Invalid request: a bad field, query parameter or cursor, or an operation the queue's kind "
    "does not allow (a non-zero priority or the max end on a FIFO queue).",
    401: "Not authenticated.",
    403: "Not allowed (or not authenticated, with session authentication).",
    404: "No queue of that name.",
    409: "A queue of that name already exists.",
    413: "A value is larger than 100,000 bytes once encoded, or the request body is larger than the "
    "project's DATA_UPLOAD_MAX_MEMORY_SIZE.",
    503: "The database is unavailable or timed out; retry after the Retry-After header's seconds.",
}
_ERROR_SERIALIZERS = {400: ValidationErrorSerializer, 503: UnavailableErrorSerializer}
_RETRY_AFTER = OpenApiParameter(
    "Retry-After", int, OpenApiParameter.HEADER, response=[503], description="Seconds to wait before retrying."
)
_NAME = OpenApiParameter(
    "name",
    str,
    OpenApiParameter.PATH,
    required=True,
    pattern=rf"^~?{QUEUE_NAME_REGEX}$",
    description=(
        "Queue name: 1 to 200 letters, digits, '.', '_' or '-'. The queues named '.' and '..' are "
        "written '~.' and '~..' here, since clients collapse those path segments."
    ),
)
_EMPTY = OpenApiResponse(description="The queue is empty: no body.")


def _operation(
    summary: str,
    success: dict[int, Any],
    errors: tuple[int, ...] = (),
    *,
    on_queue: bool = True,
    query: type | None = None,
    **kwargs: Any,
) -> Any:
    """extend_schema for one operation: its successes, its errors, plus those every operation has
    (401/403 from authentication, 503 with Retry-After from the database)."""
    responses = {
        code: OpenApiResponse(
            _ERROR_SERIALIZERS.get(code, ErrorSerializer), description=_ERROR_DESCRIPTIONS[code]
        )
        for code in sorted({*errors, 401, 403, 503})
    }
    parameters = [_NAME] if on_queue else []
    parameters += [query] if query else []
    return extend_schema(
        summary=summary, responses={**success, **responses}, parameters=[*parameters, _RETRY_AFTER], **kwargs
    )


_PUSH_REQUEST = PolymorphicProxySerializer(
    component_name="PushRequest",
    serializers=[PushItemSerializer, PushBatchSerializer],
    resource_type_field_name=None,
)
_PUSH_RESPONSE = PolymorphicProxySerializer(
    component_name="PushResponse",
    serializers=[ItemSerializer, ItemListSerializer],
    resource_type_field_name=None,
)

# ----------------------------------------------------------------------------- the viewset


@transactional
def _push_batch(tr: Any, name: str, pairs: list[tuple[Any, int]]) -> list[Any]:
    """A batch from one request in one transaction: a 201 means all were stored, an error none.

    (service.push_many given a database may split a large batch over several transactions; the
    request body bound in parsers.py keeps one request's batch well inside one.) Returns the
    pending items of the attempt that committed; their ids resolve once it has.
    """
    return service.push_many(tr, name, pairs)


@extend_schema_view(
    list=_operation(
        "List queues",
        {200: OpenApiResponse(QueuePageSerializer, description="A page of queues, ordered by name.")},
        (400,),
        on_queue=False,
        query=QueueListQuerySerializer,
        description="One page at a time; follow `next` for the rest.",
    ),
    create=_operation(
        "Create a queue",
        {201: OpenApiResponse(QueueSerializer, description="Created.")},
        (400, 409, 413),
        on_queue=False,
        request=QueueCreateSerializer,
    ),
    retrieve=_operation(
        "Get a queue and its statistics",
        {200: OpenApiResponse(QueueSerializer, description="The queue.")},
        (404,),
    ),
    destroy=_operation(
        "Delete a queue and all its items",
        {204: OpenApiResponse(description="Deleted.")},
        (404,),
    ),
)
class QueueViewSet(viewsets.ViewSet):
    """Named FIFO queues and double-ended priority queues."""

    lookup_field = "name"
    # Any one path segment: a name the service refuses is then a JSON 400, not Django's HTML 404.
    lookup_value_regex = r"[^/]+"
    # Bodies are JSON only: a push's nested items have no form encoding, and the schema says so.
    parser_classes = [BoundedJSONParser]

    # -- policy: ours, whatever the project's DRF defaults say

    def get_permissions(self) -> list[BasePermission]:
        return permissions.get_permissions()

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return exception_handler

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if "name" in kwargs:
            kwargs["name"] = segment_to_name(kwargs["name"])  # "~.." is the queue ".."
        return super().dispatch(request, *args, **kwargs)

    # -- helpers

    @property
    def db(self) -> Any:
        """The app's database handle; failing to open it is an outage (503), not a crash."""
        try:
            return get_database()
        except Exception as exc:  # noqa: BLE001 - any failure to connect is reported the same way
            logger.error("Cannot open the queue database", exc_info=exc)
            fdb_error = exc.code if isinstance(exc, FDBError) else None
            raise DatabaseUnavailable(fdb_error=fdb_error) from exc

    def _query(self, serializer_class: type, request: Request) -> dict[str, Any]:
        serializer = serializer_class(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def _body(self, serializer_class: type, request: Request) -> Any:
        serializer = serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        return serializer

    def _page(self, request: Request, next_cursor: str | None, results: list[Any]) -> Response:
        next_url = None
        if next_cursor is not None:
            next_url = replace_query_param(request.build_absolute_uri(), "cursor", next_cursor)
        return Response({"next": next_url, "results": results})

    def _queue(self, info: Any) -> dict[str, Any]:
        return QueueSerializer(info, context={"request": self.request}).data

    @staticmethod
    def _item_or_empty(item: Any) -> Response:
        if item is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(ItemSerializer(item).data)

    # -- queues

    def list(self, request: Request) -> Response:
        query = self._query(QueueListQuerySerializer, request)
        page = service.list_queues(
            self.db, prefix=query["prefix"], cursor=query["cursor"], limit=query["limit"]
        )
        return self._page(request, page.next_cursor, [self._queue(info) for info in page.items])

    def create(self, request: Request) -> Response:
        data = self._body(QueueCreateSerializer, request).validated_data
        info = service.create_queue(self.db, data["name"], data["kind"])
        return Response(self._queue(info), status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(self._queue(service.get_queue(self.db, name)))

    def destroy(self, request: Request, name: str) -> Response:
        service.delete_queue(self.db, name)
        return Response(status=status.HTTP_204_NO_CONTENT)

    # -- items

    @_operation(
        "Push one item or a batch",
        {201: OpenApiResponse(_PUSH_RESPONSE, description='The item; for a batch, {"items": [...]}.')},
        (400, 404, 413),
        request=_PUSH_REQUEST,
        description=(
            '`{"value": any JSON, "priority": int}` pushes one item (priority defaults to 0; a FIFO '
            'queue accepts only 0). `{"items": [{"value", "priority"}, ...]}` pushes a batch in one '
            "transaction (all or nothing) and answers with the items in the order given."
        ),
    )
    @action(detail=True, methods=["post"])
    def push(self, request: Request, name: str) -> Response:
        serializer = self._body(PushSerializer, request)
        data = serializer.validated_data
        if serializer.is_batch:
            pairs = [(entry["value"], entry["priority"]) for entry in data["items"]]
            items = [pending.result(wait=True) for pending in _push_batch(self.db, name, pairs)]
            body = {"items": ItemSerializer(items, many=True).data}
            return Response(body, status=status.HTTP_201_CREATED)
        item = service.push(self.db, name, data["value"], data["priority"])
        return Response(ItemSerializer(item).data, status=status.HTTP_201_CREATED)

    @_operation(
        "Remove and return the item at one end",
        {200: OpenApiResponse(ItemSerializer, description="The removed item."), 204: _EMPTY},
        (400, 404),
        query=EndQuerySerializer,
        request=None,
    )
    @action(detail=True, methods=["post"])
    def pop(self, request: Request, name: str) -> Response:
        end = self._query(EndQuerySerializer, request)["end"]
        return self._item_or_empty(service.pop(self.db, name, end=end))

    @_operation(
        "Return the item at one end without removing it",
        {200: OpenApiResponse(ItemSerializer, description="The item, still queued."), 204: _EMPTY},
        (400, 404),
        query=EndQuerySerializer,
    )
    @action(detail=True, methods=["get"])
    def peek(self, request: Request, name: str) -> Response:
        end = self._query(EndQuerySerializer, request)["end"]
        return self._item_or_empty(service.peek(self.db, name, end=end))

    @_operation(
        "Browse items in queue order without removing them",
        {200: OpenApiResponse(ItemPageSerializer, description="A page of items, in queue order from `end`.")},
        (400, 404),
        query=BrowseQuerySerializer,
    )
    @action(detail=True, methods=["get"])
    def items(self, request: Request, name: str) -> Response:
        query = self._query(BrowseQuerySerializer, request)
        page = service.browse(self.db, name, end=query["end"], cursor=query["cursor"], limit=query["limit"])
        return self._page(request, page.next_cursor, ItemSerializer(page.items, many=True).data)

    @_operation(
        "Remove every item, keeping the queue",
        {204: OpenApiResponse(description="Cleared.")},
        (404,),
        request=None,
    )
    @action(detail=True, methods=["post"])
    def clear(self, request: Request, name: str) -> Response:
        service.clear(self.db, name)
        return Response(status=status.HTTP_204_NO_CONTENT)

