"""The metrics endpoint: Prometheus's text format, guarded exactly like the REST API.

It is a DRF view for the guard alone: the project's DRF authentication classes (sessions, basic
auth, tokens: whatever ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]`` names), the
permission classes of ``FDBQUEUE["PERMISSION_CLASSES"]`` through ``api.permissions``, then
``view`` on every queue (the ``fdbqueue.view_queue`` permission or a grant on ``*``), the project's
throttles, and the API's exception handler for the 401/403 bodies. Metrics name every
queue and show the traffic, so they are no more public than the queues themselves.

Prometheus asks for its formats in ``Accept``; DRF's content negotiation must not refuse those
with a 406, so it is forced (errors are rendered as JSON), and the metrics themselves are an
``HttpResponse`` that skips DRF's renderers.

Importing this module registers the operation listener (see the package docstring). Without
``prometheus-client`` it still imports, and the endpoint answers 501 with what to install.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from django.http import HttpResponse
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from django_fdbqueue.api import permissions
from django_fdbqueue.api.access import EveryQueueView
from django_fdbqueue.api.exceptions import exception_handler

from . import DEFAULT_MAX_QUEUES, MISSING_DEPENDENCY

logger = logging.getLogger("django_fdbqueue.metrics")

try:
    from . import exposition, instruments
except ImportError as exc:
    if not (exc.name or "").startswith("prometheus_client"):
        raise
    exposition = None  # type: ignore[assignment]
else:
    instruments.install()

__all__ = ["MetricsView"]


class MetricsView(APIView):
    """GET: every metric in Prometheus's text format (or OpenMetrics, when asked for)."""

    #: Not part of the queue API's OpenAPI schema.
    schema = None
    renderer_classes: list[type[BaseRenderer]] = [JSONRenderer]
    #: Queues one scrape reads at most; ``MetricsView.as_view(max_queues=...)`` changes it.
    max_queues: int = DEFAULT_MAX_QUEUES

    def get_permissions(self) -> list[BasePermission]:
        # Metrics name every queue and show its depth: view on every queue (see api.access).
        return [*permissions.get_permissions(), EveryQueueView()]

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return exception_handler

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # Prometheus may accept only its own formats; never answer 406 for that.
        return super().perform_content_negotiation(request, force=True)

    def get(self, request: Request) -> HttpResponse:
        if exposition is None:
            logger.error("The metrics URL was requested, but prometheus-client is not installed.")
            return _text(MISSING_DEPENDENCY + "\n", status=501)
        accept = request.META.get("HTTP_ACCEPT", "")
        body, content_type = exposition.render(accept, max_queues=self.max_queues)
        return _text(body, content_type=content_type)


def _text(body: str | bytes, *, status: int = 200, content_type: str = "text/plain; charset=utf-8") -> HttpResponse:
    response = HttpResponse(body, status=status, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
