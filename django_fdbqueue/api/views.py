"""The queue API's one viewset: parse with a serializer, call the service, shape the answer.

No queue rule lives here. Errors travel as exceptions to ``api.exceptions.exception_handler``,
which the viewset names itself so the mapping does not depend on the project's DRF settings.
How the OpenAPI document describes each operation is ``schemas.py``'s.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

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
from .schemas import queue_operations
from .waitbudget import RETRY_AFTER_SECONDS, WaitBudget, budget
from .serializers.queues import KeyLimitQuerySerializer, KeyLimitStateSerializer
from .serializers import (
    MAX_WAIT_SECONDS,
    BrowseQuerySerializer,
    ClaimSerializer,
    DeadLetterSerializer,
    EndQuerySerializer,
    ExtendBodySerializer,
    ItemSerializer,
    LeaseSerializer,
    LeaseTimeSerializer,
    PageQuerySerializer,
    PopQuerySerializer,
    PushedItemSerializer,
    PushSerializer,
    QueueCreateSerializer,
    QueueListQuerySerializer,
    QueueSerializer,
    QueueUpdateSerializer,
    ReceiptSerializer,
    ReleasedSerializer,
    ReleaseSerializer,
    ScheduledItemSerializer,
)

__all__ = ["MAX_WAIT_SECONDS", "QueueViewSet"]

logger = logging.getLogger("django_fdbqueue.api")


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


@queue_operations
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

    @action(detail=True, methods=["get"])
    def peek(self, request: Request, name: str) -> Response:
        end = self._query(EndQuerySerializer, request)["end"]
        return self._item_or_empty(service.peek(self.db, name, end=end))

    @action(detail=True, methods=["get"])
    def items(self, request: Request, name: str) -> Response:
        return self._listing(request, name, service.browse, BrowseQuerySerializer, ItemSerializer)

    # -- reliable consumption: leases, scheduled items, dead letters

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

    @action(detail=True, methods=["post"])
    def ack(self, request: Request, name: str) -> Response:
        data = self._body(ReceiptSerializer, request).validated_data
        service.ack(self.db, data["receipt"], name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @action(detail=True, methods=["post"])
    def release(self, request: Request, name: str) -> Response:
        data = self._body(ReleaseSerializer, request).validated_data
        state = service.release(self.db, data["receipt"], delay=data["delay"], name=name)
        return Response(ReleasedSerializer({"state": state}).data)

    @action(detail=True, methods=["post"])
    def extend(self, request: Request, name: str) -> Response:
        data = self._body(ExtendBodySerializer, request).validated_data
        lease = service.extend(self.db, data["receipt"], data["lease"], name=name)
        return Response(LeaseTimeSerializer(lease).data)

    @action(detail=True, methods=["get"])
    def scheduled(self, request: Request, name: str) -> Response:
        return self._listing(request, name, service.scheduled, PageQuerySerializer, ScheduledItemSerializer)

    @action(detail=True, methods=["get"], url_path="dead-letters")
    def dead_letters(self, request: Request, name: str) -> Response:
        return self._listing(request, name, service.dead_letters, PageQuerySerializer, DeadLetterSerializer)

    @action(detail=True, methods=["post"], url_path=r"dead-letters/(?P<item_id>[^/]+)/requeue")
    def requeue_dead_letter(self, request: Request, name: str, item_id: str) -> Response:
        return Response(ItemSerializer(service.requeue_dead_letter(self.db, name, item_id)).data)

    @action(detail=True, methods=["delete"], url_path=r"dead-letters/(?P<item_id>[^/]+)")
    def delete_dead_letter(self, request: Request, name: str, item_id: str) -> Response:
        service.delete_dead_letter(self.db, name, item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

    # -- per-key limits

    @action(detail=True, methods=["get"], url_path="key-limits")
    def key_limits(self, request: Request, name: str) -> Response:
        query = self._query(KeyLimitQuerySerializer, request)
        return Response(KeyLimitStateSerializer(service.key_limit_state(self.db, name, top=query["top"])).data)

    # -- clearing

    @action(detail=True, methods=["post"])
    def clear(self, request: Request, name: str) -> Response:
        service.clear(self.db, name)
        return Response(status=status.HTTP_204_NO_CONTENT)
