"""The API's request parser: JSON, with a bound on the body's size.

Django's DATA_UPLOAD_MAX_MEMORY_SIZE guards ``request.body``; recent DRF versions read JSON
through it (the exception handler turns Django's RequestDataTooBig into our 413), but older ones
hand the parser the raw stream, where no bound applies. This parser applies it either way, for two
reasons: a client cannot make the server buffer an unbounded body, and a batch push, which is
written in one transaction, stays far below FoundationDB's 10 MB transaction limit.
"""

from __future__ import annotations

import io
from typing import Any, Mapping

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from .exceptions import RequestTooLarge


class BoundedJSONParser(JSONParser):
    """JSONParser that refuses bodies over DATA_UPLOAD_MAX_MEMORY_SIZE bytes (None: no bound)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None:
            body = stream.read(limit + 1)
            if len(body) > limit:
                raise RequestTooLarge(f"The request body is larger than {limit} bytes.")
            stream = io.BytesIO(body)
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
