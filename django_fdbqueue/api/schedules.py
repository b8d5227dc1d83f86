"""The schedules routes: list, create, retrieve, update (PATCH), delete, pause, resume, run-now.

Thin over ``django_fdbqueue.schedules``: a serializer checks the request, the schedules module does
the work, errors go through the API's one exception handler (``api.exceptions``). Mounted at
``schedules/`` by ``api.urls``, with the queues' permissions. A schedule is its target queue's:
``view`` on that queue shows it, ``manage`` changes it (both, for a change of target); a task
target needs the action on every queue (``api.access.require_on_target``).
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from django_fdbqueue import schedules
from django_fdbqueue.access import QueueAccessDenied, events
from django_fdbqueue.exceptions import ScheduleAlreadyExists, ScheduleNotFound
from django_fdbqueue.connection import get_database
from django_fdbqueue.schedules.model import Schedule, as_data, iso, target_queue

from .access import may_on_target, require_on_target
from .policy import AppViewSet
from .serializers import ErrorSerializer, UnavailableErrorSerializer, ValidationErrorSerializer
from .serializers.schedules import (
    NAME_REGEX,
    FiredSerializer,
    ScheduleCreateSerializer,
    ScheduleSerializer,
    ScheduleUpdateSerializer,
)

_ERRORS = {
    400: (
        ValidationErrorSerializer,
        "Invalid request: a malformed cron expression, an unknown time zone, "
        "a bad catch-up policy, an interval of zero or less, a bad target or name, or an unknown field.",
    ),
    401: (ErrorSerializer, "Not authenticated."),
    403: (ErrorSerializer, "Not allowed (or not authenticated, with session authentication)."),
    404: (ErrorSerializer, "No schedule of that name."),
    409: (ErrorSerializer, "A schedule you may view has that name (one you may not view: 403)."),
    503: (UnavailableErrorSerializer, "The database is unavailable or timed out; retry later."),
}
_UNKNOWN_FIELDS = (
    " A field the body does not define is refused too, never ignored: code invalid, and `errors` names it "
    'with "Unknown field.".'
)
_RETRY_AFTER = OpenApiParameter(
    "Retry-After", int, OpenApiParameter.HEADER, response=[503], description="Seconds to wait before retrying."
)
_NAME = OpenApiParameter(
    "name", str, OpenApiParameter.PATH, required=True, pattern=rf"^{NAME_REGEX}$", description="The schedule's name."
)


#: A view method, which ``_schema``'s decorator returns as it was given.
F = TypeVar("F", bound=Callable[..., Any])


def _schema(
    summary: str, success: dict[int, Any], errors: tuple[int, ...], *, named: bool = True, **kwargs: Any
) -> Callable[[F], F]:
    body = kwargs.get("request") is not None
    responses = {
        code: OpenApiResponse(
            _ERRORS[code][0], description=_ERRORS[code][1] + (_UNKNOWN_FIELDS if body and code == 400 else "")
        )
        for code in sorted({*errors, 401, 403, 503})
    }
    return extend_schema(
        summary=summary,
        responses={**success, **responses},
        parameters=[*([_NAME] if named else []), _RETRY_AFTER],
        tags=["schedules"],
        **kwargs,
    )


class ScheduleViewSet(AppViewSet):
    """Periodic schedules: push an item or enqueue a task on a cron expression or an interval."""

    def _body(self, serializer_class: type, request: Request) -> dict[str, Any]:
        serializer = serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    def _schedule(self, request: Request, name: str, action: str) -> Schedule:
        """The schedule ``name`` (404 if none), once ``action`` on its target queue is allowed.

        One whose target the user may not even see answers as a missing one does, body and all.
        """
        schedule = schedules.get(get_database(), name)
        try:
            require_on_target(request, action, target_queue(schedule.target))
        except QueueAccessDenied as refused:
            if refused.visible:
                raise
            raise ScheduleNotFound(f"No schedule is named {name!r}.", name=name) from None
        return schedule

    @_schema("List schedules", {200: ScheduleSerializer(many=True)}, (), named=False)
    def list(self, request: Request) -> Response:
        shown = [
            s
            for s in schedules.list_schedules(get_database())
            if may_on_target(request, "view", target_queue(s.target))
        ]
        return Response([as_data(s) for s in shown])

    @_schema("Create a schedule", {201: ScheduleSerializer}, (400, 409), named=False, request=ScheduleCreateSerializer)
    def create(self, request: Request) -> Response:
        data = self._body(ScheduleCreateSerializer, request)
        require_on_target(request, "manage", target_queue(data["target"]), creating=True)
        name = data.pop("name")
        try:
            created = schedules.create(get_database(), name, data.pop("target"), **data)
        except ScheduleAlreadyExists:
            self._refuse_hidden_name(request, name)
            raise
        return Response(as_data(created), status=status.HTTP_201_CREATED)

    @staticmethod
    def _refuse_hidden_name(request: Request, name: str) -> None:
        """A name taken by a schedule the user may not see is refused as a name the user may not
        use (403), not "already exists", which would tell what its 404 hides (security page)."""
        try:
            holder = schedules.get(get_database(), name)
        except ScheduleNotFound:
            holder = None  # deleted meanwhile: still not a name to confirm
        if holder is not None and may_on_target(request, "view", target_queue(holder.target)):
            return
        events.emit(events.REFUSED, "manage")
        raise exceptions.PermissionDenied(f"You may not create a schedule named {name!r}.")

    @_schema("Show a schedule", {200: ScheduleSerializer}, (400, 404))
    def retrieve(self, request: Request, name: str) -> Response:
        return Response(as_data(self._schedule(request, name, "view")))

    @_schema("Change a schedule's definition", {200: ScheduleSerializer}, (400, 404), request=ScheduleUpdateSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        self._schedule(request, name, "manage")
        changes = self._body(ScheduleUpdateSerializer, request)
        if "target" in changes:  # moving a schedule needs manage on where it goes too
            require_on_target(request, "manage", target_queue(changes["target"]), creating=True)
        return Response(as_data(schedules.update(get_database(), name, **changes)))

    @_schema("Delete a schedule", {204: None}, (400, 404))
    def destroy(self, request: Request, name: str) -> Response:
        self._schedule(request, name, "manage")  # 404 for a name that is not there
        schedules.delete(get_database(), name)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @_schema("Pause a schedule", {200: ScheduleSerializer}, (400, 404), request=None)
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, name: str) -> Response:
        self._schedule(request, name, "manage")
        return Response(as_data(schedules.pause(get_database(), name)))

    @_schema("Resume a schedule from its next occurrence", {200: ScheduleSerializer}, (400, 404), request=None)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, name: str) -> Response:
        self._schedule(request, name, "manage")
        return Response(as_data(schedules.resume(get_database(), name)))

    @_schema("Fire a schedule once now", {200: FiredSerializer}, (400, 404), request=None)
    @action(detail=True, methods=["post"], url_path="run-now")
    def run_now(self, request: Request, name: str) -> Response:
        self._schedule(request, name, "manage")
        fired = schedules.run_now(get_database(), name)
        result = {k: v for k, v in fired.result.items() if k != "at_us"}
        return Response({"name": fired.name, "result": {**result, "at": iso(fired.result.get("at_us"))}})
