"""What every paged listing shares: the next link of a page, and ?cursor= and ?limit=."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from .fields import CursorField, QueryIntegerField
from .limits import DEFAULT_LIMIT, MAX_LIMIT


class PageSerializer(serializers.Serializer[Any]):
    """What every page has besides its results: the link to the next one."""

    next = serializers.URLField(allow_null=True, help_text="The next page, or null on the last one.")


class PageQuerySerializer(serializers.Serializer[Any]):
    """Query of the scheduled and dead-letter listings; with ?end=, of the items listing."""

    cursor = CursorField(required=False, default=None, allow_null=True, help_text="From a page's next link.")
    limit = QueryIntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Page size."
    )
