"""What every viewset of the API shares, whatever the project's DRF defaults say.

Our own schema class (see ``openapi``), names as one path segment (a name the service refuses is
then a JSON 400, not Django's HTML 404), JSON bodies only (a push's nested items have no form
encoding), the permissions of ``FDBQUEUE["PERMISSION_CLASSES"]`` then the queue grants
(``api.access``: each route's action on its queue, and the audit of changes), and the API's one
exception handler. Authentication and throttling stay the project's (``REST_FRAMEWORK``).

DRF's browsable API asks the permissions whether to draw each method's form (a PATCH, a DELETE)
on a page the user only reads. Those questions are answered quietly (no refusal is counted for
a form not drawn) and a refusal is DRF's own, which the renderer reads as "no form".
"""

from __future__ import annotations

from typing import Any, Callable

from django.core.exceptions import PermissionDenied
from rest_framework import exceptions, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from django_fdbqueue.access import events

from . import access, openapi, permissions
from .exceptions import exception_handler
from .parsers import BoundedJSONParser


class AppViewSet(viewsets.ViewSet):
    """The API's policy; subclasses add their routes."""

    schema = openapi.QueueAutoSchema()
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    parser_classes = [BoundedJSONParser]

    def get_permissions(self) -> list[BasePermission]:
        return [*permissions.get_permissions(), access.QueueAccess()]

    #: Set once the view has answered: a permission check after that is the browsable API's
    #: question about a form (see the module docstring), never the request's own.
    _answered = False

    def check_permissions(self, request: Any) -> None:
        if not self._answered:
            super().check_permissions(request)
            return
        with events.quiet():
            try:
                super().check_permissions(request)
            except PermissionDenied as refusal:
                raise exceptions.PermissionDenied(str(refusal)) from None

    def check_object_permissions(self, request: Any, obj: Any) -> None:
        if not self._answered:
            super().check_object_permissions(request, obj)
            return
        with events.quiet():
            try:
                super().check_object_permissions(request, obj)
            except PermissionDenied as refusal:
                raise exceptions.PermissionDenied(str(refusal)) from None

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        self._answered = True  # what asks the permissions from now on is the renderer
        access.audit_change(request, self, response.status_code)
        return response

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return exception_handler
