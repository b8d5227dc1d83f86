"""The waiting routes (pop and claim) as async Django views: under ASGI a long poll holds no thread.

DRF has no async views, so the route's view is the viewset's own DRF view, run in three steps:
on a thread, everything DRF does before the action, which under ASGI answers a :class:`Deferred`
instead of waiting; on the event loop, the awaited ``apop_returnable`` / ``aclaim_returnable``,
parked without a thread; then the answer, shaped by the same viewset. Under
:class:`~django_fdbqueue.asgi.FdbQueueASGIHandler` the item's give-back goes to the request's
:class:`~django_fdbqueue.asgi.Handover`, so a disconnect before the answer is sent gives it back.
The wrapper keeps the DRF view's attributes, so the OpenAPI schema is the viewset's, unchanged.

Why not ``adrf``, and how this runs under WSGI and under Django's own ASGI handler: the code map,
"The async views of the REST API" (docs/explanation/code-map.md).
"""

from __future__ import annotations

import functools
from typing import Any, Awaitable, Callable

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from rest_framework import status
from rest_framework.response import Response

from django_fdbqueue.asgi import HANDOVER, Handover
from django_fdbqueue.service.asynchronous import Returnable

__all__ = ["Deferred", "WaitsOnLoop", "async_view", "waits_on_loop"]

_FLAG = "_fdbqueue_waits_on_loop"


class Deferred(Response):
    """What a waiting action answers under ASGI: the wait to await on the loop, and how to answer.

    Never sent itself: :func:`async_view` awaits ``wait()`` and sends ``answer(result)``. A
    :class:`~django_fdbqueue.service.asynchronous.Returnable` result is answered with its value,
    and given back if that answer is not sent (see the module's docstring).
    """

    def __init__(self, view: Any, wait: Callable[[], Awaitable[Any]], answer: Callable[[Any], Response]) -> None:
        super().__init__(status=status.HTTP_204_NO_CONTENT)
        self.view, self.wait, self.answer = view, wait, answer


class _EveryDatabase:
    """Django's ``_non_atomic_requests`` for every alias: ATOMIC_REQUESTS refuses async views
    (RuntimeError), and no database transaction should span a wait of up to 20 s anyway."""

    def __contains__(self, alias: object) -> bool:
        return True


def waits_on_loop(request: Any) -> bool:
    """True when the request came through :func:`async_view` under an ASGI server."""
    return getattr(getattr(request, "_request", request), _FLAG, False)


def async_view(view: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """The async twin of a DRF view function whose actions may answer a :class:`Deferred`."""

    async def waiting_view(request: Any, *args: Any, **kwargs: Any) -> Any:
        setattr(request, _FLAG, isinstance(request, ASGIRequest))
        response = await sync_to_async(view)(request, *args, **kwargs)
        if not isinstance(response, Deferred):
            return response
        return await _finish(response)

    functools.update_wrapper(waiting_view, view)  # cls, actions, initkwargs, csrf_exempt: see above
    waiting_view._non_atomic_requests = _EveryDatabase()  # type: ignore[attr-defined]
    return waiting_view


async def _finish(deferred: Deferred) -> Any:
    """Await the wait; answer with the viewset, as its sync dispatch would have."""
    view = deferred.view
    try:
        result = await deferred.wait()
    except Exception as exc:  # noqa: BLE001 - every error goes to the viewset's exception handler
        return await sync_to_async(_error)(view, exc)
    # On the loop, with no await between the service's answer and the hand-over: a disconnect can
    # no longer cancel the view once it holds an item. (The waiting routes are never audited, so
    # finalizing them touches no database.)
    if not isinstance(result, Returnable):
        return view.finalize_response(view.request, deferred.answer(result), *view.args, **view.kwargs)
    try:
        response = view.finalize_response(view.request, deferred.answer(result.value), *view.args, **view.kwargs)
    except BaseException:
        result.give_back()  # the client gets an error, not the item
        raise
    handover = _handover(view.request)
    if handover is not None:
        handover.hold(result.give_back)
    return response


def _handover(request: Any) -> Handover | None:
    """The request's :class:`~django_fdbqueue.asgi.Handover`, under the app's ASGI handler."""
    scope = getattr(getattr(request, "_request", request), "scope", None)
    found = scope.get(HANDOVER) if isinstance(scope, dict) else None
    return found if isinstance(found, Handover) else None


def _error(view: Any, exc: Exception) -> Any:
    return view.finalize_response(view.request, view.handle_exception(exc), *view.args, **view.kwargs)


class WaitsOnLoop:
    """For a viewset: the routes of ``waiting_actions`` are async views (:func:`async_view`)."""

    waiting_actions: frozenset[str] = frozenset()

    @classmethod
    def as_view(cls, actions: dict[str, str] | None = None, **initkwargs: Any) -> Callable[..., Any]:
        view: Callable[..., Any] = super().as_view(actions, **initkwargs)  # type: ignore[misc]
        if actions and cls.waiting_actions & set(actions.values()):
            return async_view(view)
        return view

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(response, Deferred):
            return response  # finalized once its real answer exists (async_view)
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
