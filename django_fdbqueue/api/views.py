"""The queue API's one viewset: parse with a serializer, call the service, shape the answer.

No queue rule lives here. Errors travel as exceptions to ``api.exceptions.exception_handler``,
which the viewset names itself so the mapping does not depend on the project's DRF settings.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, TypeVar

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from django_fdbqueue import service
from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import FDBError, transactional
from django_fdbqueue.paths import segment_to_name
from django_fdbqueue.service import asynchronous

from .access import visible_page
from .asyncviews import Deferred, WaitsOnLoop, waits_on_loop
from .exceptions import DatabaseUnavailable
from .policy import AppViewSet
from .waitbudget import RETRY_AFTER_SECONDS, WaitBudget, budget
from .serializers.queues import KeyLimitQuerySerializer, KeyLimitStateSerializer
from .serializers import (
    DEDUP_WINDOW_SECONDS,
    MAX_WAIT_SECONDS,
    QUEUE_NAME_REGEX,
    BrowseQuerySerializer,
    ClaimSerializer,
    DeadLetterPageSerializer,
    DeadLetterSerializer,
    EndQuerySerializer,
    ErrorSerializer,
    ExtendBodySerializer,
    ExtendSecondsSerializer,
    ExtendSerializer,
    ItemListSerializer,
    ItemPageSerializer,
    ItemSerializer,
    LeaseGoneErrorSerializer,
    LeaseSerializer,
    LeaseTimeSerializer,
    PageQuerySerializer,
    PopQuerySerializer,
    PushBatchSerializer,
    PushedItemSerializer,
    PushItemSerializer,
    PushSerializer,
    QueueCreateSerializer,
    QueueListQuerySerializer,
    QueuePageSerializer,
    QueueSerializer,
    QueueUpdateSerializer,
    ReceiptSerializer,
    ReleasedSerializer,
    ReleaseSerializer,
    ScheduledItemSerializer,
    ScheduledPageSerializer,
    UnavailableErrorSerializer,
    ValidationErrorSerializer,
)

__all__ = ["MAX_WAIT_SECONDS", "QueueViewSet"]

logger = logging.getLogger("django_fdbqueue.api")

# ----------------------------------------------------------------------------- schema helpers

_ERROR_DESCRIPTIONS = {
    400: "Invalid request: a bad field, query parameter or cursor, or an operation the queue's kind "
    "does not allow (a non-zero priority or the max end on a FIFO queue).",
    # Operations that take a JSON body add _UNKNOWN_FIELDS to it (see _operation).
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
    # "~" only ever escapes the names "." and ".."; "~x" is no queue's segment (a 400).
    pattern=rf"^(?:~\.\.?|{QUEUE_NAME_REGEX})$",
    description=(
        "Queue name: 1 to 200 letters, digits, '.', '_' or '-'. The queues named '.' and '..' are "
        "written '~.' and '~..' here, since clients collapse those path segments."
    ),
)
_ITEM_ID = OpenApiParameter(
    "item_id",
    str,
    OpenApiParameter.PATH,
    required=True,
    pattern=r"^[A-Za-z0-9_-]+$",
    description="The dead letter's item id, as the dead-letter listing shows it.",
)
# The waiting routes also send Retry-After with a 204 that did not wait (see api/waitbudget.py).
_WAIT_RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    int,
    OpenApiParameter.HEADER,
    response=[204, 503],
    description="Seconds to wait before retrying. On a 204: every long poll this server process may hold "
    "was taken, so this request did not wait; poll again after that many seconds.",
)
_EMPTY = OpenApiResponse(description="The queue is empty: no body.")
_NOTHING_CAME = OpenApiResponse(
    description="No item was visible, or none came within `wait`: no body. With a `Retry-After` header, the "
    "request did not wait: the server was already holding as many long polls as it allows "
    "(the WAIT_BUDGET setting); come back after that many seconds."
)

# Per-operation wording of the errors whose meaning differs from the default.
_BODY_TOO_LARGE = {413: "The request body is larger than the project's DATA_UPLOAD_MAX_MEMORY_SIZE."}
_UNKNOWN_FIELDS = (
    ' A field the body does not define (a typo such as "prio") is refused too, never ignored: code '
    'invalid, and `errors` names it with "Unknown field.".'
)
_RECEIPT_ERRORS = {
    **_BODY_TOO_LARGE,
    400: "Invalid body, or a receipt that no claim on this queue handed out (code invalid_receipt).",
    409: "Your lease is gone: stop working on the item, it will be (or has been) delivered again; the "
    "refused call changed nothing. The body says so the same way whatever the cause: `lease_gone` is "
    "true, and `reason` (with the code) says why: expired (lease_expired: its time ran out and nobody "
    "has taken the item yet) or not_found (lease_not_found: it was acked or released, or its item came "
    "back or was claimed again, or the queue was cleared or created again).",
}
_RECEIPT_ERROR_SERIALIZERS = {409: LeaseGoneErrorSerializer}
# Every route under queues/{name}/ answers a name the service refuses with a 400.
_BAD_NAME = {400: "The name in the path is not a valid queue name (code invalid_queue_name)."}
_DEAD_LETTER_ERRORS = {
    400: "Not an item id this service hands out, or an invalid queue name.",
    404: "No queue of that name (queue_not_found), or no dead letter with that id (dead_letter_not_found).",
}

#: A view method, which ``_operation``'s decorator returns as it was given.
F = TypeVar("F", bound=Callable[..., Any])


def _operation(
    summary: str,
    success: dict[int, Any],
    errors: tuple[int, ...] = (),
    *,
    on_queue: bool = True,
    query: type | None = None,
    path: tuple[OpenApiParameter, ...] = (),
    notes: dict[int, str] | None = None,
    bodies: Mapping[int, type] | None = None,
    retry_after: OpenApiParameter = _RETRY_AFTER,
    **kwargs: Any,
) -> Callable[[F], F]:
    """extend_schema for one operation: its successes, its errors, plus those every operation has
    (401/403 from authentication, 503 with Retry-After from the database). ``notes`` rewords an
    error for this operation, ``bodies`` gives an error a body of its own; ``path`` adds path
    parameters after the queue name. An operation that takes a JSON body says that unknown
    fields in it are a 400. ``retry_after`` is the Retry-After header's documentation."""
    descriptions = {**_ERROR_DESCRIPTIONS, **(notes or {})}
    if kwargs.get("request") is not None:
        descriptions[400] += _UNKNOWN_FIELDS
    serializers = {**_ERROR_SERIALIZERS, **(bodies or {})}
    responses = {
        code: OpenApiResponse(serializers.get(code, ErrorSerializer), description=descriptions[code])
        for code in sorted({*errors, 401, 403, 503})
    }
    parameters: list[OpenApiParameter | type] = [_NAME] if on_queue else []
    parameters += [*path, *([query] if query else [])]
    return extend_schema(
        summary=summary, responses={**success, **responses}, parameters=[*parameters, retry_after], **kwargs
    )


_PUSH_REQUEST = PolymorphicProxySerializer(
    component_name="PushRequest",
    serializers=[PushItemSerializer, PushBatchSerializer],
    resource_type_field_name=None,
)
# Swagger UI would otherwise make up a body from the schema: every field at once (delay *and*
# not_before, a 400) and "string" for tenant and key. Each of these works as offered; the first,
# the default, on any queue (tests/test_api_schema.py runs them all).
_PUSH_EXAMPLES = [
    OpenApiExample(
        "One item",
        value={"value": {"task": "resize", "image": 7}},
        request_only=True,
        description="Priority 0, the only one a FIFO queue accepts.",
    ),
    OpenApiExample(
        "One item with a priority",
        value={"value": {"task": "resize", "image": 8}, "priority": 5},
        request_only=True,
        description="On a priority queue: lower pops first from the min end.",
    ),
    OpenApiExample(
        "A batch",
        value={"items": [{"value": {"task": "email", "to": "ops"}}, {"value": {"task": "email", "to": "dev"}}]},
        request_only=True,
        description="All stored in one transaction, or none.",
    ),
    OpenApiExample(
        "Delayed",
        value={"value": {"task": "remind"}, "delay": 60},
        request_only=True,
        description="Invisible for 60 seconds; `not_before` gives a time instead (not both).",
    ),
    OpenApiExample(
        "Deduplicated by a key",
        value={"value": {"task": "invoice", "order": 42}, "dedup_key": "invoice-42"},
        request_only=True,
        description="A retry with the same dedup_key adds nothing and answers 200 with the item.",
    ),
    OpenApiExample(
        "With a limit key",
        value={"value": {"url": "https://example.com/a"}, "key": "example.com"},
        request_only=True,
        description="Claims are limited per key by the queue's key limits.",
    ),
    OpenApiExample(
        "On a queue split by tenant",
        value={"value": {"task": "export"}, "tenant": "acme"},
        request_only=True,
        description="Only there: every push names its tenant.",
    ),
]
_EXTEND_REQUEST = PolymorphicProxySerializer(
    component_name="ExtendRequest",
    serializers=[ExtendSerializer, ExtendSecondsSerializer],
    resource_type_field_name=None,
)
_PUSH_RESPONSE = PolymorphicProxySerializer(
    component_name="PushResponse",
    serializers=[PushedItemSerializer, ItemListSerializer],
    resource_type_field_name=None,
)

# ----------------------------------------------------------------------------- the viewset


@transactional
def _push_batch(tr: Any, name: str, pairs: list[tuple[Any, int]], schedule: dict[str, Any]) -> list[Any]:
    """A batch from one request in one transaction: a 201 means all were stored, an error none.

    (service.push_many given a database may split a large batch over several transactions; the
    request body bound in parsers.py keeps one request's batch well inside one.) ``schedule``
    holds the batch's delay or not_before, if any. Returns the pending items of the attempt that
    committed; their ids resolve once it has.
    """
    return service.push_many(tr, name, pairs, **schedule)


def _schedule(data: dict[str, Any]) -> dict[str, Any]:
    """The delay / not_before a push body gave, as service keyword arguments."""
    return {key: data[key] for key in ("delay", "not_before") if key in data}


def _limit_key(data: dict[str, Any]) -> dict[str, Any]:
    """The push body's limit key and tenant, if any, as service keyword arguments."""
    return {field: data[field] for field in ("key", "tenant") if field in data}


_KEY_LIMIT_FIELDS = (("concurrency", "key_concurrency"), ("rate", "key_rate"))
_KEEP = object()


@transactional
def _set_options(tr: Any, name: str, max_attempts: Any, limits: dict[str, Any]) -> Any:
    """A PATCH's changes in one transaction: all of them or (on an error) none."""
    info = service.set_key_limits(tr, name, **limits)
    if max_attempts is not _KEEP:
        info = service.set_max_attempts(tr, name, max_attempts)
    return info


def _wait(seconds: float) -> float | None:
    """The API's wait=0 ("answer at once") is the service's wait=None."""
    return seconds if seconds > 0 else None


def _nothing(refused: bool) -> Response:
    """A 204; one refused its wait by the budget says when to poll again."""
    response = Response(status=status.HTTP_204_NO_CONTENT)
    if refused:
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


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
        (400, 404),
        notes=_BAD_NAME,
    ),
    partial_update=_operation(
        "Change a queue's max_attempts or per-key limits",
        {200: OpenApiResponse(QueueSerializer, description="The queue, changed.")},
        (400, 404, 413),
        notes=_BODY_TOO_LARGE,
        request=QueueUpdateSerializer,
        description="`max_attempts`, `key_concurrency` and `key_rate` are the settings a queue may change; "
        "null removes a limit. Items already dead stay dead. An empty body changes nothing.",
    ),
    destroy=_operation(
        "Delete a queue and all its items",
        {204: OpenApiResponse(description="Deleted.")},
        (400, 404),
        notes=_BAD_NAME,
    ),
)
# ignore[misc]: WaitsOnLoop.as_view may return an async view, which the stubs' AsView (sync) cannot name.
class QueueViewSet(WaitsOnLoop, AppViewSet):  # type: ignore[misc]
    """Named FIFO queues and double-ended priority queues."""

    #: What long polls ask before they wait: a waiting request holds a WSGI thread. None lets every
    #: request wait. Under ASGI the waiting routes await instead, holding no thread, and skip it.
    wait_budget: WaitBudget | None = budget
    #: Async views (``asyncviews``): under ASGI they wait on the event loop.
    waiting_actions = frozenset({"pop", "claim"})

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
        data: dict[str, Any] = serializer.validated_data
        return data

    def _body(self, serializer_class: type, request: Request) -> Any:
        serializer = serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        return serializer

    def _page(self, request: Request, next_cursor: str | None, results: list[Any]) -> Response:
        next_url = None
        if next_cursor is not None:
            next_url = replace_query_param(request.build_absolute_uri(), "cursor", next_cursor)
        return Response({"next": next_url, "results": results})

    def _listing(
        self, request: Request, name: str, listing: Callable[..., Any], query_class: type, serializer_class: type
    ) -> Response:
        """One page of a queue's items, scheduled items or dead letters: the whole validated query
        (cursor and limit, and end where it has one) is ``listing``'s keyword arguments."""
        query = self._query(query_class, request)
        page = listing(self.db, name, **query)
        return self._page(request, page.next_cursor, serializer_class(page.items, many=True).data)

    def _queue(self, info: Any) -> dict[str, Any]:
        return QueueSerializer(info, context={"request": self.request}).data

    @staticmethod
    def _item_or_empty(item: Any, refused: bool = False) -> Response:
        if item is None:
            return _nothing(refused)
        return Response(ItemSerializer(item).data)

    @staticmethod
    def _lease_or_empty(lease: Any, refused: bool = False) -> Response:
        if lease is None:
            return _nothing(refused)
        return Response(LeaseSerializer(lease).data)

    def _long_poll(
        self,
        operation: Callable[[float | None], Any],
        awaited: Callable[[float | None], Any],
        seconds: float,
        answer: Callable[[Any, bool], Response],
    ) -> Response:
        """``answer(operation(wait), refused)`` within the wait budget; under ASGI, a
        :class:`~.asyncviews.Deferred` that awaits ``awaited(wait)`` on the loop instead.

        A request beyond the budget still looks once, without waiting, so a visible item is
        never refused; only an empty answer tells the client to come back later (``refused``).
        Under ASGI even ``wait=0`` is awaited: the async service gives back what a pop or claim
        took for a client that disconnected meanwhile.
        """
        wait = _wait(seconds)
        if waits_on_loop(self.request):
            return Deferred(self, lambda: awaited(wait), lambda result: answer(result, False))
        if wait is None or self.wait_budget is None:
            return answer(operation(wait), False)
        if not self.wait_budget.try_enter():
            return answer(operation(None), True)
        try:
            return answer(operation(wait), False)
        finally:
            self.wait_budget.leave()

    # -- queues

    def list(self, request: Request) -> Response:
        query = self._query(QueueListQuerySerializer, request)
        # Only the queues the user may view, read on until the page is full (see visible_page).
        page = visible_page(request, self.db, query["prefix"], query["cursor"], query["limit"])
        return self._page(request, page.next_cursor, [self._queue(info) for info in page.items])

    def create(self, request: Request) -> Response:
        data = self._body(QueueCreateSerializer, request).validated_data
        info = service.create_queue(
            self.db,
            data["name"],
            data["kind"],
            max_attempts=data["max_attempts"],
            key_concurrency=data["key_concurrency"],
            key_rate=data["key_rate"],
            tenants=data["tenants"],
        )
        return Response(self._queue(info), status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(self._queue(service.get_queue(self.db, name)))

    def partial_update(self, request: Request, name: str) -> Response:
        data = self._body(QueueUpdateSerializer, request).validated_data
        limits = {option: data[field] for option, field in _KEY_LIMIT_FIELDS if field in data}
        if limits:
            info = _set_options(self.db, name, data.get("max_attempts", _KEEP), limits)
            return Response(self._queue(info))
        if "max_attempts" not in data:
            return Response(self._queue(service.get_queue(self.db, name)))
        return Response(self._queue(service.set_max_attempts(self.db, name, data["max_attempts"])))

    def destroy(self, request: Request, name: str) -> Response:
        service.delete_queue(self.db, name)
        return Response(status=status.HTTP_204_NO_CONTENT)

    # -- items

    @_operation(
        "Push one item or a batch",
        {
            201: OpenApiResponse(_PUSH_RESPONSE, description='The item; for a batch, {"items": [...]}.'),
            200: OpenApiResponse(
                PushedItemSerializer,
                description="The dedup_key matched an earlier push: nothing was added; the earlier item, "
                'with "duplicate": true.',
            ),
        },
        (400, 404, 413),
        request=_PUSH_REQUEST,
        examples=_PUSH_EXAMPLES,
        description=(
            '`{"value": any JSON, "priority": int}` pushes one item (priority defaults to 0; a FIFO '
            'queue accepts only 0). `{"items": [{"value", "priority"}, ...]}` pushes a batch in one '
            "transaction (all or nothing) and answers with the items in the order given. `delay` "
            "(seconds) or `not_before` (a time with its offset) keeps the item, or the whole batch, "
            "invisible until then. A single push may carry a `dedup_key`: if an item pushed with the same "
            "key is still queued, delayed, leased or dead, or was consumed less than "
            f"{DEDUP_WINDOW_SECONDS:g} seconds ago, nothing is added and the answer is 200 with that item."
        ),
    )
    @action(detail=True, methods=["post"])
    def push(self, request: Request, name: str) -> Response:
        serializer = self._body(PushSerializer, request)
        data = serializer.validated_data
        if serializer.is_batch:
            pairs = [(entry["value"], entry["priority"]) for entry in data["items"]]
            pending = _push_batch(self.db, name, pairs, {**_schedule(data), **_limit_key(data)})
            items = [entry.result(wait=True) for entry in pending]
            body = {"items": PushedItemSerializer(items, many=True).data}
            return Response(body, status=status.HTTP_201_CREATED)
        dedup = {"dedup_key": data["dedup_key"]} if "dedup_key" in data else {}
        dedup.update(_limit_key(data))
        item = service.push(self.db, name, data["value"], data["priority"], **_schedule(data), **dedup)
        assert isinstance(item, service.Item)  # given a database, push returns the committed item
        code = status.HTTP_200_OK if item.duplicate else status.HTTP_201_CREATED
        return Response(PushedItemSerializer(item).data, status=code)

    @_operation(
        "Remove and return the item at one end",
        {200: OpenApiResponse(ItemSerializer, description="The removed item."), 204: _NOTHING_CAME},
        (400, 404),
        query=PopQuerySerializer,
        request=None,
        retry_after=_WAIT_RETRY_AFTER,
        description=(
            f"With `wait` (seconds, at most {MAX_WAIT_SECONDS:g}), an empty queue holds the request until an "
            "item becomes visible or the time is up (long polling); a larger wait is a 400. A pop is at most "
            "once: an answer sent but not received loses its item. (Under the app's ASGI handler a client that "
            "disconnects before its answer is sent leaves the item in the queue.) Claim for at-least-once delivery."
        ),
    )
    @action(detail=True, methods=["post"])
    def pop(self, request: Request, name: str) -> Response:
        query = self._query(PopQuerySerializer, request)
        db, end = self.db, query["end"]
        return self._long_poll(
            lambda wait: service.pop(db, name, end=end, wait=wait),
            lambda wait: asynchronous.apop_returnable(db, name, end=end, wait=wait),
            query["wait"],
            self._item_or_empty,
        )

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
        return self._listing(request, name, service.browse, BrowseQuerySerializer, ItemSerializer)

    # -- reliable consumption: leases, scheduled items, dead letters

    @_operation(
        "Claim the item at one end under a lease",
        {200: OpenApiResponse(LeaseSerializer, description="The claimed item and its lease."), 204: _NOTHING_CAME},
        (400, 404, 413),
        notes=_BODY_TOO_LARGE,
        request=ClaimSerializer,
        retry_after=_WAIT_RETRY_AFTER,
        description=(
            "The item stays in the queue but is invisible to others for `lease` seconds. Ack it with the "
            "receipt when done; release it to give it back; extend the lease for more time. If the lease "
            "ends first, the item comes back at its place and will be claimed again (after `max_attempts` "
            f"claims it becomes a dead letter instead). `wait` (at most {MAX_WAIT_SECONDS:g} s) long-polls "
            "an empty queue. `spread` trades exact order for claimers that rarely collide."
        ),
    )
    @action(detail=True, methods=["post"])
    def claim(self, request: Request, name: str) -> Response:
        data = self._body(ClaimSerializer, request).validated_data
        db, options = self.db, {"lease": data["lease"], "end": data["end"], "spread": data.get("spread")}
        return self._long_poll(
            lambda wait: service.claim(db, name, wait=wait, **options),
            lambda wait: asynchronous.aclaim_returnable(db, name, wait=wait, **options),
            data["wait"],
            self._lease_or_empty,
        )

    @_operation(
        "Acknowledge a claimed item: it is removed for good",
        {204: OpenApiResponse(description="Acknowledged: the item is gone.")},
        (400, 404, 409, 413),
        notes=_RECEIPT_ERRORS,
        bodies=_RECEIPT_ERROR_SERIALIZERS,
        request=ReceiptSerializer,
    )
    @action(detail=True, methods=["post"])
    def ack(self, request: Request, name: str) -> Response:
        data = self._body(ReceiptSerializer, request).validated_data
        service.ack(self.db, data["receipt"], name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @_operation(
        "Give a claimed item back",
        {200: OpenApiResponse(ReleasedSerializer, description="Where the item went.")},
        (400, 404, 409, 413),
        notes=_RECEIPT_ERRORS,
        bodies=_RECEIPT_ERROR_SERIALIZERS,
        request=ReleaseSerializer,
        description=(
            "The item becomes claimable again at its place, at once or after `delay` seconds. An item "
            "already claimed `max_attempts` times goes to the dead letters instead."
        ),
    )
    @action(detail=True, methods=["post"])
    def release(self, request: Request, name: str) -> Response:
        data = self._body(ReleaseSerializer, request).validated_data
        state = service.release(self.db, data["receipt"], delay=data["delay"], name=name)
        return Response(ReleasedSerializer({"state": state}).data)

    @_operation(
        "Extend a lease",
        {200: OpenApiResponse(LeaseTimeSerializer, description="The same receipt and the lease's new end.")},
        (400, 404, 409, 413),
        notes=_RECEIPT_ERRORS,
        bodies=_RECEIPT_ERROR_SERIALIZERS,
        request=_EXTEND_REQUEST,
        description="The lease now ends `lease` seconds from now (shorter or longer than before), `lease` "
        "meaning what it means for claim. `seconds` is its old name, still accepted (deprecated); not both.",
    )
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, name: str) -> Response:
        data = self._body(ExtendBodySerializer, request).validated_data
        lease = service.extend(self.db, data["receipt"], data["lease"], name=name)
        return Response(LeaseTimeSerializer(lease).data)

    @_operation(
        "Browse leased and delayed items",
        {200: OpenApiResponse(ScheduledPageSerializer, description="A page, by the time each becomes visible.")},
        (400, 404),
        query=PageQuerySerializer,
    )
    @action(detail=True, methods=["get"])
    def scheduled(self, request: Request, name: str) -> Response:
        return self._listing(request, name, service.scheduled, PageQuerySerializer, ScheduledItemSerializer)

    @_operation(
        "Browse dead letters",
        {200: OpenApiResponse(DeadLetterPageSerializer, description="A page of dead letters, in queue order.")},
        (400, 404),
        query=PageQuerySerializer,
        description="Items claimed `max_attempts` times without an ack. Requeue or delete them one by one.",
    )
    @action(detail=True, methods=["get"], url_path="dead-letters")
    def dead_letters(self, request: Request, name: str) -> Response:
        return self._listing(request, name, service.dead_letters, PageQuerySerializer, DeadLetterSerializer)

    @_operation(
        "Put a dead letter back in the queue",
        {200: OpenApiResponse(ItemSerializer, description="The item, ready again at its old place, attempts 0.")},
        (400, 404),
        path=(_ITEM_ID,),
        notes=_DEAD_LETTER_ERRORS,
        request=None,
    )
    @action(detail=True, methods=["post"], url_path=r"dead-letters/(?P<item_id>[^/]+)/requeue")
    def requeue_dead_letter(self, request: Request, name: str, item_id: str) -> Response:
        return Response(ItemSerializer(service.requeue_dead_letter(self.db, name, item_id)).data)

    @_operation(
        "Delete a dead letter",
        {204: OpenApiResponse(description="Deleted.")},
        (400, 404),
        path=(_ITEM_ID,),
        notes=_DEAD_LETTER_ERRORS,
    )
    @action(detail=True, methods=["delete"], url_path=r"dead-letters/(?P<item_id>[^/]+)")
    def delete_dead_letter(self, request: Request, name: str, item_id: str) -> Response:
        service.delete_dead_letter(self.db, name, item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    # -- per-key limits

    @_operation(
        "Per-key limits and where the keys stand",
        {
            200: OpenApiResponse(
                KeyLimitStateSerializer, description="The limits, the busiest keys, those at the limit."
            )
        },
        (400, 404),
        query=KeyLimitQuerySerializer,
        description="Items pushed with a `key` are limited by the queue's `key_concurrency` (leases at once) "
        "and `key_rate` (claims per second) per key. `leased` lists the `top` keys by leases held.",
    )
    @action(detail=True, methods=["get"], url_path="key-limits")
    def key_limits(self, request: Request, name: str) -> Response:
        query = self._query(KeyLimitQuerySerializer, request)
        return Response(KeyLimitStateSerializer(service.key_limit_state(self.db, name, top=query["top"])).data)

    # -- clearing

    @_operation(
        "Remove every item, keeping the queue",
        {204: OpenApiResponse(description="Cleared.")},
        (400, 404),
        notes=_BAD_NAME,
        request=None,
    )
    @action(detail=True, methods=["post"])
    def clear(self, request: Request, name: str) -> Response:
        service.clear(self.db, name)
        return Response(status=status.HTTP_204_NO_CONTENT)
