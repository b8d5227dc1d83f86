"""Serializers of the REST API: they validate requests and shape responses, nothing else.

The queue service does the work and has the final word on every rule; the checks here exist so a
client gets a field-level 400 before any transaction starts.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.reverse import reverse

from django_fdbqueue.paths import name_to_segment

QUEUE_NAME_REGEX = r"[A-Za-z0-9._-]{1,200}"
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
# One request may push at most this many items; keeps a request's work (and body) bounded.
MAX_BATCH_ITEMS = 500
KINDS = ("fifo", "priority")
ENDS = ("min", "max")


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only: DRF's own field would also take "5", 5.0 and true, which hide client bugs."""

    default_error_messages = {"invalid": "A JSON integer is required."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    """A JSON string only, taken as sent: DRF would turn 12 into "12" and strip " jobs\\n" to
    "jobs", accepting what the service refuses."""

    def __init__(self, regex: str, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(regex, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class QueueNameField(StrictRegexField):
    """A queue name, refused with the code the service and the URL routes use for bad names."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 200)
        super().__init__(rf"^{QUEUE_NAME_REGEX}\Z", **kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        try:
            return super().run_validation(data)
        except serializers.ValidationError as error:
            if data is serializers.empty:
                raise
            raise serializers.ValidationError(
                "1 to 200 characters of letters, digits, '.', '_' and '-', exactly as sent.",
                code="invalid_queue_name",
            ) from error


class UntrimmedCharField(serializers.CharField):
    """A query string taken as sent: a cursor or prefix with stray spaces is refused, not "fixed"."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)


class PriorityField(StrictIntegerField):
    """A priority: a signed 64-bit integer, as the service stores it."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", INT64_MIN)
        kwargs.setdefault("max_value", INT64_MAX)
        kwargs.setdefault("help_text", "Signed 64-bit integer; lower pops first from the min end.")
        super().__init__(**kwargs)


class ValueField(serializers.JSONField):
    """Any JSON value, null included.

    Values pushed as bytes from Python (the service's bytes codec) have no JSON form; they are
    shown as ``{"$base64": "<standard base64>"}`` rather than breaking the response.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        # JSON null is a value like any other here, not "field left empty".
        if data is None:
            return (True, None)
        return super().validate_empty_values(data)

    def to_representation(self, value: Any) -> Any:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return {"$base64": base64.b64encode(bytes(value)).decode("ascii")}
        return super().to_representation(value)


# ----------------------------------------------------------------------------- responses


class ErrorSerializer(serializers.Serializer):
    """Every error body: a message for people and a stable code for programs."""

    detail = serializers.CharField(help_text="What went wrong, in words.")
    code = serializers.CharField(help_text="Stable machine-readable error code.")


class ValidationErrorSerializer(ErrorSerializer):
    """A 400 for invalid input also lists the problems per field."""

    errors = serializers.DictField(
        child=serializers.JSONField(),
        required=False,
        help_text="Messages per field (non_field_errors for the request as a whole).",
    )


class UnavailableErrorSerializer(ErrorSerializer):
    """A 503 names the FoundationDB error code when there is one."""

    fdb_error = serializers.IntegerField(
        required=False, allow_null=True, help_text="FoundationDB error code, if the database raised one."
    )


class ItemSerializer(serializers.Serializer):
    """One queued item, as pop, peek, push and browse return it."""

    id = serializers.CharField(help_text="Opaque, stable, URL-safe identifier.")
    priority = PriorityField()
    value = ValueField()
    enqueued_at = serializers.DateTimeField(default_timezone=datetime.timezone.utc)


class ItemListSerializer(serializers.Serializer):
    """The items a batch push stored, in the order given."""

    items = ItemSerializer(many=True)


class QueueSerializer(serializers.Serializer):
    """A queue with its statistics; nulls where the queue is empty. Needs the request in its context."""

    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=KINDS)
    size = serializers.IntegerField()
    pushed = serializers.IntegerField(help_text="Items pushed since the queue was created.")
    popped = serializers.IntegerField(help_text="Items popped since the queue was created.")
    min_priority = serializers.IntegerField(allow_null=True)
    max_priority = serializers.IntegerField(allow_null=True)
    oldest_age_seconds = serializers.FloatField(allow_null=True, help_text="Age of the oldest item.")
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
class QueuePageSerializer(serializers.Serializer):
    """One page of queues, ordered by name."""

    next = serializers.URLField(allow_null=True, help_text="The next page, or null on the last one.")
    results = QueueSerializer(many=True)


@extend_schema_serializer(many=False)
class ItemPageSerializer(serializers.Serializer):
    """One page of items, in queue order from the requested end."""

    next = serializers.URLField(allow_null=True, help_text="The next page, or null on the last one.")
    results = ItemSerializer(many=True)


# ----------------------------------------------------------------------------- requests


class StrictFieldsMixin:
    """Refuse fields the serializer does not know: a typo ("prio") must not be silently dropped."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))  # type: ignore[attr-defined]
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
        return super().to_internal_value(data)  # type: ignore[misc]


class QueueCreateSerializer(StrictFieldsMixin, serializers.Serializer):
    """POST queues/."""

    name = QueueNameField()
    kind = serializers.ChoiceField(choices=KINDS, default="fifo")


class PushItemSerializer(StrictFieldsMixin, serializers.Serializer):
    """One value to push; FIFO queues accept only priority 0."""

    value = ValueField(required=True)
    priority = PriorityField(default=0)


class PushBatchSerializer(serializers.Serializer):
    """Several values to push in one request."""

    items = PushItemSerializer(many=True, allow_empty=False, max_length=MAX_BATCH_ITEMS)


class PushSerializer(StrictFieldsMixin, serializers.Serializer):
    """POST queues/{name}/push/: either one item ({"value", "priority"}) or a batch ({"items": [...]})."""

    value = ValueField(required=False)
    priority = PriorityField(required=False)
    items = PushItemSerializer(many=True, required=False, allow_empty=False, max_length=MAX_BATCH_ITEMS)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "items" in attrs:
            if "value" in attrs or "priority" in attrs:
                message = 'Send either "items" or "value" (and "priority"), not both.'
                raise serializers.ValidationError(message)
            return attrs
        if "value" not in attrs:
            raise serializers.ValidationError({"value": ["This field is required."]})
        attrs.setdefault("priority", 0)
        return attrs

    @property
    def is_batch(self) -> bool:
        return "items" in self.validated_data


class EndQuerySerializer(serializers.Serializer):
    """?end= of pop and peek."""

    end = serializers.ChoiceField(choices=ENDS, default="min", help_text="Which end: min (default) or max.")


class QueueListQuerySerializer(serializers.Serializer):
    """Query of GET queues/."""

    prefix = UntrimmedCharField(required=False, default="", allow_blank=True, max_length=200)
    cursor = UntrimmedCharField(required=False, default=None, allow_null=True, help_text="From a page's next link.")
    limit = serializers.IntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Page size."
    )


class BrowseQuerySerializer(EndQuerySerializer):
    """Query of GET queues/{name}/items/."""

    cursor = UntrimmedCharField(required=False, default=None, allow_null=True, help_text="From a page's next link.")
    limit = serializers.IntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Page size."
    )
