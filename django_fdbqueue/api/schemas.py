"""The queue API's OpenAPI text: what each operation of ``views.QueueViewSet`` takes, answers and
refuses, as drf-spectacular's ``extend_schema`` decorators.

Kept apart from the views, as DRF keeps schema generation apart from views: ``views.py`` says
what a request does, this module says how the generated document describes it, and
``openapi.py`` holds the generator's extensions (rules the serializers enforce). The viewset
wears :data:`queue_operations`; ``manage.py spectacular`` reads the document from it.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_view,
)

from .serializers.queues import KeyLimitQuerySerializer, KeyLimitStateSerializer
from .serializers import (
    DEDUP_WINDOW_SECONDS,
    MAX_WAIT_SECONDS,
    QUEUE_NAME_REGEX,
    BrowseQuerySerializer,
    ClaimSerializer,
    DeadLetterPageSerializer,
    EndQuerySerializer,
    ErrorSerializer,
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
    QueueCreateSerializer,
    QueueListQuerySerializer,
    QueuePageSerializer,
    QueueSerializer,
    QueueUpdateSerializer,
    ReceiptSerializer,
    ReleasedSerializer,
    ReleaseSerializer,
    ScheduledPageSerializer,
    UnavailableErrorSerializer,
    ValidationErrorSerializer,
)

__all__ = ["queue_operations"]

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


#: The viewset's decorator: one ``_operation`` per route, by the name of the view method it documents.
queue_operations = extend_schema_view(
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
    push=_operation(
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
    ),
    pop=_operation(
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
    ),
    peek=_operation(
        "Return the item at one end without removing it",
        {200: OpenApiResponse(ItemSerializer, description="The item, still queued."), 204: _EMPTY},
        (400, 404),
        query=EndQuerySerializer,
    ),
    items=_operation(
        "Browse items in queue order without removing them",
        {200: OpenApiResponse(ItemPageSerializer, description="A page of items, in queue order from `end`.")},
        (400, 404),
        query=BrowseQuerySerializer,
    ),
    claim=_operation(
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
    ),
    ack=_operation(
        "Acknowledge a claimed item: it is removed for good",
        {204: OpenApiResponse(description="Acknowledged: the item is gone.")},
        (400, 404, 409, 413),
        notes=_RECEIPT_ERRORS,
        bodies=_RECEIPT_ERROR_SERIALIZERS,
        request=ReceiptSerializer,
    ),
    release=_operation(
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
    ),
    extend=_operation(
        "Extend a lease",
        {200: OpenApiResponse(LeaseTimeSerializer, description="The same receipt and the lease's new end.")},
        (400, 404, 409, 413),
        notes=_RECEIPT_ERRORS,
        bodies=_RECEIPT_ERROR_SERIALIZERS,
        request=_EXTEND_REQUEST,
        description="The lease now ends `lease` seconds from now (shorter or longer than before), `lease` "
        "meaning what it means for claim. `seconds` is its old name, still accepted (deprecated); not both.",
    ),
    scheduled=_operation(
        "Browse leased and delayed items",
        {200: OpenApiResponse(ScheduledPageSerializer, description="A page, by the time each becomes visible.")},
        (400, 404),
        query=PageQuerySerializer,
    ),
    dead_letters=_operation(
        "Browse dead letters",
        {200: OpenApiResponse(DeadLetterPageSerializer, description="A page of dead letters, in queue order.")},
        (400, 404),
        query=PageQuerySerializer,
        description="Items claimed `max_attempts` times without an ack. Requeue or delete them one by one.",
    ),
    requeue_dead_letter=_operation(
        "Put a dead letter back in the queue",
        {200: OpenApiResponse(ItemSerializer, description="The item, ready again at its old place, attempts 0.")},
        (400, 404),
        path=(_ITEM_ID,),
        notes=_DEAD_LETTER_ERRORS,
        request=None,
    ),
    delete_dead_letter=_operation(
        "Delete a dead letter",
        {204: OpenApiResponse(description="Deleted.")},
        (400, 404),
        path=(_ITEM_ID,),
        notes=_DEAD_LETTER_ERRORS,
    ),
    key_limits=_operation(
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
    ),
    clear=_operation(
        "Remove every item, keeping the queue",
        {204: OpenApiResponse(description="Cleared.")},
        (400, 404),
        notes=_BAD_NAME,
        request=None,
    ),
)
