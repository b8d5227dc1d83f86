"""Queues: how they are shown and listed, created and changed."""

from __future__ import annotations

import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.reverse import reverse

from django_fdbqueue.paths import name_to_segment

from .fields import CursorField, QueryIntegerField, QueueNameField, QueuePrefixField, StrictFieldsMixin, StrictIntegerField
from .limits import DEFAULT_LIMIT, KINDS, MAX_ATTEMPTS_LIMIT, MAX_LIMIT
from .pages import PageSerializer


class QueueSerializer(serializers.Serializer):
    """A queue with its statistics; nulls where the queue is empty. Needs the request in its context.

    ``size`` counts ready items only; leased, delayed and dead ones are counted apart.
    """

    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=KINDS)
    size = serializers.IntegerField()
    pushed = serializers.IntegerField(help_text="Items pushed since the queue was created.")
    popped = serializers.IntegerField(help_text="Items popped since the queue was created.")
    min_priority = serializers.IntegerField(allow_null=True)
    max_priority = serializers.IntegerField(allow_null=True)
    oldest_age_seconds = serializers.FloatField(allow_null=True, help_text="Age of the oldest item.")
    oldest_enqueued_at = serializers.DateTimeField(
        allow_null=True, default_timezone=datetime.timezone.utc, help_text="When the oldest ready item was pushed."
    )
    created_at = serializers.DateTimeField(
        default_timezone=datetime.timezone.utc, help_text="When the queue was created."
    )
    leased = serializers.IntegerField(help_text="Items claimed and not yet acked, released or expired.")
    delayed = serializers.IntegerField(help_text="Items pushed or released with a delay that has not passed.")
    dead = serializers.IntegerField(help_text="Dead letters.")
    max_attempts = serializers.IntegerField(
        allow_null=True, help_text="Claims without an ack after which an item becomes a dead letter; null: no limit."
    )
    url = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, queue: Any) -> str:
        request = self.context["request"]
        # Reverse inside the namespace the API was mounted under, whatever the project called it.
        namespace = request.resolver_match.namespace if request.resolver_match else ""
        viewname = f"{namespace}:queue-detail" if namespace else "queue-detail"
        return reverse(viewname, kwargs={"name": name_to_segment(queue.name)}, request=request)


# A page object, not a list, even on the list action.
@extend_schema_serializer(many=False)
class QueuePageSerializer(PageSerializer):
    """One page of queues, ordered by name."""

    results = QueueSerializer(many=True)


def _max_attempts_field(**kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(
        min_value=1,
        max_value=MAX_ATTEMPTS_LIMIT,
        allow_null=True,
        help_text=f"1 to {MAX_ATTEMPTS_LIMIT} claims without an ack, after which an item becomes a dead "
        "letter; null: no limit.",
        **kwargs,
    )


class QueueCreateSerializer(StrictFieldsMixin, serializers.Serializer):
    """POST queues/."""

    name = QueueNameField()
    kind = serializers.ChoiceField(choices=KINDS, default="fifo")
    max_attempts = _max_attempts_field(default=None)


class QueueUpdateSerializer(StrictFieldsMixin, serializers.Serializer):
    """PATCH queues/{name}/: the one setting a queue may change. Absent, nothing changes (as
    PATCH goes, and as the schema, which documents PATCH bodies as partial, says)."""

    max_attempts = _max_attempts_field(required=False)


class QueueListQuerySerializer(serializers.Serializer):
    """Query of GET queues/."""

    prefix = QueuePrefixField(required=False, default="", allow_blank=True, max_length=200)
    cursor = CursorField(required=False, default=None, allow_null=True, help_text="From a page's next link.")
    limit = QueryIntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Page size."
    )
