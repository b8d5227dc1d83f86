"""What every viewset of the API shares, whatever the project's DRF defaults say.

Our own schema class (see ``openapi``), names as one path segment (a name the service refuses is
then a JSON 400, not Django's HTML 404), JSON bodies only (a push's nested items have no form
encoding), the permissions of ``FDBQUEUE["PERMISSION_CLASSES"]`` then the queue grants
(``api.access``: each route's action on its queue, and the audit of changes), and the API's one
exception handler. Authentication and throttling stay the project's (``REST_FRAMEWORK``).
"""

from __future__ import annotations

from typing import Any, Callable

from rest_framework import viewsets
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

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

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        access.audit_change(request, self, response.status_code)
        return response

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return exception_handler
