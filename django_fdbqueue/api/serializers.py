"""Serializers of the REST API: they validate requests and shape responses, nothing else.

The queue service does the work and has the final word on every rule; the checks here exist so a
client gets a field-level 400 before any transaction starts.
"""

from __future__ import annotations

import base64
import datetime
import math
import re
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.reverse import reverse

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidCursor, LeaseExpired, LeaseNotFound
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
# Long polling holds a server worker for the whole wait: at most the service's one cap (20 s, the
# reason is at service.MAX_WAIT_SECONDS), and a longer wait is refused rather than cut short.
MAX_WAIT_SECONDS = service.MAX_WAIT_SECONDS
# The service's bounds, checked here too so a client gets a field-level 400 (and the schema
# documents them); the service keeps the final word.
DEFAULT_LEASE_SECONDS = service.DEFAULT_LEASE_SECONDS
MAX_LEASE_SECONDS = service.MAX_LEASE_SECONDS
MAX_DELAY_SECONDS = service.MAX_DELAY_SECONDS
MAX_ATTEMPTS_LIMIT = service.MAX_ATTEMPTS_LIMIT
DEDUP_WINDOW_SECONDS = service.DEDUP_WINDOW_SECONDS
DEDUP_KEY_MAX_LENGTH = 200
# Receipts are tokens of the service; none is longer than this.
RECEIPT_MAX_LENGTH = 2_000
STATES_SCHEDULED = ("leased", "delayed")
STATES_RELEASED = ("ready", "delayed", "dead")
LEASE_GONE_REASONS = (LeaseExpired.reason, LeaseNotFound.reason)


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


# Cursors are URL-safe base64 tokens; the service refuses anything else (invalid_cursor).
@extend_schema_field({"type": "string", "pattern": r"^[A-Za-z0-9_-]+$"})
class CursorField(UntrimmedCharField):
    """?cursor= of a listing: a page's next link carries it. Anything this field refuses (NUL, say)
    is refused with the code the service uses for bad cursors."""

    def run_validation(self, data: Any = serializers.empty) -> Any:
        try:
            return super().run_validation(data)
        except serializers.ValidationError as error:
            if data is serializers.empty:
                raise
            raise serializers.ValidationError(InvalidCursor.default_message, code=InvalidCursor.code) from error


# The schema of ?prefix=: what the service accepts (it refuses anything else with a 400,
# invalid_queue_name, which this field leaves to it).
@extend_schema_field({"type": "string", "pattern": r"^[A-Za-z0-9._-]{0,200}$"})
class QueuePrefixField(UntrimmedCharField):
    """?prefix= of the queue list: the start of a queue name, or empty."""


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


class StrictCharField(serializers.CharField):
    """A JSON string only, taken as sent, that can be stored: DRF would turn 12 into "12", strip
    spaces, and let a lone surrogate through to the tuple layer, which cannot encode it."""

    default_error_messages = {
        "invalid": "A JSON string is required.",
        "unencodable": "The string holds a lone surrogate, which cannot be stored.",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            self.fail("unencodable")
        return super().to_internal_value(data)


class ReceiptField(StrictCharField):
    """A lease's receipt; anything that cannot be one is refused with the service's code for it."""

    def __init__(self, **kwargs: Any) -> None:
        # An empty receipt was always refused; min_length puts that in the schema too.
        kwargs.setdefault("min_length", 1)
        kwargs.setdefault("max_length", RECEIPT_MAX_LENGTH)
        kwargs.setdefault("help_text", "The receipt a claim returned.")
        super().__init__(**kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        try:
            return super().run_validation(data)
        except serializers.ValidationError as error:
            if data is serializers.empty:
                raise
            raise serializers.ValidationError(
                "This is not a receipt handed out by a claim.", code="invalid_receipt"
            ) from error


# A decimal number as a query string spells it: no spaces, underscores, "nan" or "inf".
_QUERY_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class SecondsField(serializers.FloatField):
    """A number of seconds: a JSON number in a body ("5" and true are refused), a decimal in a
    query string; finite always (JSON's 1e400 reads as infinity); optionally above zero."""

    default_error_messages = {
        "invalid": "A number of seconds is required.",
        "not_positive": "Must be greater than 0.",
    }

    def __init__(self, *, positive: bool = False, query: bool = False, deprecated: bool = False, **kwargs: Any) -> None:
        self.positive = positive
        self.query = query
        self.deprecated = deprecated  # an old spelling, still accepted: the schema says so
        if not positive:
            # A positive field refuses 0 and below itself (not_positive), before any validator
            # runs; without a min_value validator, the schema can say "more than 0" (api/openapi.py).
            kwargs.setdefault("min_value", 0)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> float:
        if self.query:
            if not isinstance(data, str) or len(data) > 50 or not _QUERY_NUMBER.fullmatch(data):
                self.fail("invalid")
        elif isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        try:
            number = float(data)
        except OverflowError:  # a JSON integer beyond any float
            self.fail("max_value", max_value=self.max_value)
        if not math.isfinite(number):
            self.fail("invalid")
        if self.positive and number <= 0:
            self.fail("not_positive")
        return number


# An ISO 8601 / RFC 3339 date and time as clients write them, ASCII digits only: Django's
# parse_datetime (Python's fromisoformat) also reads week dates, non-ASCII digits, a trailing
# newline or a NUL before the offset, none of which a client means as a time. The offset is
# optional here so that a naive time gets its own message.
_ISO_DATETIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:[.,][0-9]{1,9})?)?"
    r"(?:[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?"
)


_QUERY_INTEGER = re.compile(r"-?[0-9]{1,20}")


class QueryIntegerField(serializers.IntegerField):
    """An integer in a query string, spelled in ASCII digits: DRF's own field would also take
    " 5", "5.0" and non-ASCII digits such as "٥" (Python's int() reads them)."""

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, str) or not _QUERY_INTEGER.fullmatch(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date and time with its UTC offset. A naive one is refused, not read in the
    server's time zone: the client's clock and ours need not share one."""

    default_error_messages = {
        "not_iso": "An ISO 8601 date and time is required, such as 2026-05-01T12:00:00Z.",
        "naive": "Give the time zone, e.g. 2026-05-01T12:00:00Z or +02:00.",
        "out_of_range": "The time is out of range once converted to UTC.",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("default_timezone", datetime.timezone.utc)
        super().__init__(**kwargs)

    def to_internal_value(self, value: Any) -> datetime.datetime:
        if not isinstance(value, str) or not _ISO_DATETIME.fullmatch(value):
            self.fail("not_iso")
        try:
            parsed = parse_datetime(value)
        except ValueError:  # well formed but impossible, such as February 30
            parsed = None
        if parsed is None:
            self.fail("not_iso")
        if parsed.tzinfo is None:
            self.fail("naive")
        try:
            return parsed.astimezone(datetime.timezone.utc)
        except OverflowError:  # year 1 or 9999 shifted out of range
            self.fail("out_of_range")


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


class LeaseGoneErrorSerializer(ErrorSerializer):
    """A 409 from ack, release or extend: the receipt's lease is gone, whichever code says why."""

    lease_gone = serializers.BooleanField(
        help_text="Always true: the lease is over, stop working on the item (it will be delivered again)."
    )
    reason = serializers.ChoiceField(
        choices=LEASE_GONE_REASONS,
        help_text="expired (code lease_expired: its time ran out) or not_found (code lease_not_found: acked, "
        "released, claimed again, cleared, or the queue created again).",
    )


class UnavailableErrorSerializer(ErrorSerializer):
    """A 503 names the FoundationDB error code when there is one."""

    fdb_error = serializers.IntegerField(
        required=False, allow_null=True, help_text="FoundationDB error code, if the database raised one."
    )


_ATTEMPTS_HELP = "How many times the item has been claimed."


class ItemSerializer(serializers.Serializer):
    """One queued item, as pop, peek, push, claim and browse return it."""

    id = serializers.CharField(help_text="Opaque, stable, URL-safe identifier.")
    priority = PriorityField()
    value = ValueField()
    enqueued_at = serializers.DateTimeField(default_timezone=datetime.timezone.utc)
    attempts = serializers.IntegerField(help_text=_ATTEMPTS_HELP)


class PushedItemSerializer(ItemSerializer):
    """A pushed item; a push whose dedup_key was seen already stored nothing and shows the first item."""

    duplicate = serializers.BooleanField(
        help_text="True when the dedup_key matched an earlier push: nothing was added, and id, priority "
        "and enqueued_at are the earlier item's."
    )


class ItemListSerializer(serializers.Serializer):
    """The items a batch push stored, in the order given."""

    items = PushedItemSerializer(many=True)


class ItemRecordSerializer(serializers.Serializer):
    """An item inside a service record (scheduled item, dead letter), shown flat with the record's fields."""

    id = serializers.CharField(source="item.id", help_text="Opaque, stable, URL-safe identifier.")
    priority = PriorityField(source="item.priority")
    value = ValueField(source="item.value")
    enqueued_at = serializers.DateTimeField(source="item.enqueued_at", default_timezone=datetime.timezone.utc)
    attempts = serializers.IntegerField(source="item.attempts", help_text=_ATTEMPTS_HELP)


class ScheduledItemSerializer(ItemRecordSerializer):
    """An item not visible yet: leased until visible_at, or delayed until then."""

    state = serializers.ChoiceField(choices=STATES_SCHEDULED, help_text="leased or delayed.")
    visible_at = serializers.DateTimeField(
        default_timezone=datetime.timezone.utc,
        help_text="When the item becomes visible again (a lease's end, or a delay's).",
    )


class DeadLetterSerializer(ItemRecordSerializer):
    """An item that was claimed max_attempts times without an ack."""

    died_at = serializers.DateTimeField(default_timezone=datetime.timezone.utc)


class LeaseTimeSerializer(serializers.Serializer):
    """A lease's receipt and end, as extend returns them."""

    receipt = serializers.CharField(help_text="Pass it to ack, release or extend. Keep it secret.")
    lease_expires_at = serializers.DateTimeField(
        default_timezone=datetime.timezone.utc, help_text="When the lease ends unless extended (ISO 8601, UTC)."
    )


class LeaseSerializer(LeaseTimeSerializer):
    """A claimed item with its lease; the item comes back to the queue unless acked before the end."""

    item = ItemSerializer()


class ReleasedSerializer(serializers.Serializer):
    """Where a released item went."""

    state = serializers.ChoiceField(
        choices=STATES_RELEASED,
        help_text="ready (claimable now), delayed (after the delay), or dead (it had been claimed "
        "max_attempts times).",
    )


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


class _PageSerializer(serializers.Serializer):
    """What every page has besides its results: the link to the next one."""

    next = serializers.URLField(allow_null=True, help_text="The next page, or null on the last one.")


# A page object, not a list, even on the list action.
@extend_schema_serializer(many=False)
class QueuePageSerializer(_PageSerializer):
    """One page of queues, ordered by name."""

    results = QueueSerializer(many=True)


@extend_schema_serializer(many=False)
class ItemPageSerializer(_PageSerializer):
    """One page of items, in queue order from the requested end."""

    results = ItemSerializer(many=True)


@extend_schema_serializer(many=False)
class ScheduledPageSerializer(_PageSerializer):
    """One page of leased and delayed items, by the time they become visible."""

    results = ScheduledItemSerializer(many=True)


@extend_schema_serializer(many=False)
class DeadLetterPageSerializer(_PageSerializer):
    """One page of dead letters, in queue order."""

    results = DeadLetterSerializer(many=True)


# ----------------------------------------------------------------------------- requests


class StrictFieldsMixin:
    """Refuse fields the serializer does not know: a typo ("prio") must not be silently dropped."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))  # type: ignore[attr-defined]
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
        return super().to_internal_value(data)  # type: ignore[misc]


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


def _delay_field(help_text: str, **kwargs: Any) -> SecondsField:
    return SecondsField(max_value=MAX_DELAY_SECONDS, help_text=help_text, **kwargs)


def _not_before_field() -> AwareDateTimeField:
    return AwareDateTimeField(
        required=False, help_text="Invisible until this time (ISO 8601 with its offset); not with delay."
    )


# DRF's CharField refuses NUL characters; the schema says so.
@extend_schema_field({"type": "string", "pattern": "^[^\\u0000]*$"})
class DedupKeyField(StrictCharField):
    """A push's dedup_key: any string without NUL, taken as sent."""


def _dedup_key_field() -> StrictCharField:
    return DedupKeyField(
        required=False,
        min_length=1,
        max_length=DEDUP_KEY_MAX_LENGTH,
        help_text=f"1 to {DEDUP_KEY_MAX_LENGTH} characters: a push whose key matches an item still queued, "
        f"delayed, leased or dead, or consumed less than {DEDUP_WINDOW_SECONDS:g} s ago, adds nothing and "
        "answers 200 with that item.",
    )


_PUSH_DELAY_HELP = "Seconds before the item becomes visible (at most 366 days); not with not_before."


def _one_schedule(attrs: dict[str, Any]) -> None:
    if "delay" in attrs and "not_before" in attrs:
        raise serializers.ValidationError('Send "delay" or "not_before", not both.')


class PushItemSerializer(StrictFieldsMixin, serializers.Serializer):
    """One value to push; FIFO queues accept only priority 0."""

    value = ValueField(required=True)
    priority = PriorityField(default=0)
    dedup_key = _dedup_key_field()
    delay = _delay_field(_PUSH_DELAY_HELP, required=False)
    not_before = _not_before_field()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        _one_schedule(attrs)
        return attrs


class PushBatchEntrySerializer(StrictFieldsMixin, serializers.Serializer):
    """One value of a batch."""

    value = ValueField(required=True)
    priority = PriorityField(default=0)


class PushBatchSerializer(StrictFieldsMixin, serializers.Serializer):
    """Several values to push in one request; delay or not_before applies to all of them.

    (The schema's form of a batch: PushSerializer parses both forms, and refuses unknown fields.)
    """

    items = PushBatchEntrySerializer(many=True, allow_empty=False, max_length=MAX_BATCH_ITEMS)
    delay = _delay_field(_PUSH_DELAY_HELP, required=False)
    not_before = _not_before_field()


class PushSerializer(StrictFieldsMixin, serializers.Serializer):
    """POST queues/{name}/push/: either one item ({"value", "priority", ...}) or a batch ({"items": [...]})."""

    value = ValueField(required=False)
    priority = PriorityField(required=False)
    dedup_key = _dedup_key_field()
    delay = _delay_field(_PUSH_DELAY_HELP, required=False)
    not_before = _not_before_field()
    items = PushBatchEntrySerializer(many=True, required=False, allow_empty=False, max_length=MAX_BATCH_ITEMS)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        _one_schedule(attrs)
        if "items" in attrs:
            if "value" in attrs or "priority" in attrs:
                message = 'Send either "items" or "value" (and "priority"), not both.'
                raise serializers.ValidationError(message)
            if "dedup_key" in attrs:
                raise serializers.ValidationError({"dedup_key": ["Only a single push takes a dedup_key."]})
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


_WAIT_HELP = (
    f"Seconds to wait for an item when none is visible (0 to {MAX_WAIT_SECONDS:g}; default 0: answer at once)."
)


class PopQuerySerializer(EndQuerySerializer):
    """Query of POST queues/{name}/pop/: ?end= and ?wait= (long polling)."""

    wait = SecondsField(query=True, default=0, max_value=MAX_WAIT_SECONDS, help_text=_WAIT_HELP)


def _lease_field(help_text: str, **kwargs: Any) -> SecondsField:
    """Seconds from now until a lease ends: claim's and extend's ``lease``, with one set of bounds."""
    return SecondsField(positive=True, max_value=MAX_LEASE_SECONDS, help_text=help_text, **kwargs)


class ClaimSerializer(StrictFieldsMixin, serializers.Serializer):
    """POST queues/{name}/claim/."""

    lease = _lease_field(
        f"Seconds the item stays invisible to others (more than 0, at most {MAX_LEASE_SECONDS:g}; "
        f"default {DEFAULT_LEASE_SECONDS:g}).",
        default=DEFAULT_LEASE_SECONDS,
    )
    wait = SecondsField(default=0, max_value=MAX_WAIT_SECONDS, help_text=_WAIT_HELP)
    end = serializers.ChoiceField(choices=ENDS, default="min", help_text="Which end: min (default) or max.")


class ReceiptSerializer(StrictFieldsMixin, serializers.Serializer):
    """POST queues/{name}/ack/."""

    receipt = ReceiptField()


class ReleaseSerializer(ReceiptSerializer):
    """POST queues/{name}/release/."""

    delay = _delay_field("Seconds before the item becomes visible again (default 0: at once).", default=0)


_EXTEND_HELP = (
    f"The lease now ends this many seconds from now (more than 0, at most {MAX_LEASE_SECONDS:g}), as claim's lease."
)


class ExtendSerializer(ReceiptSerializer):
    """POST queues/{name}/extend/: the receipt and the new ``lease``, named as claim names it."""

    lease = _lease_field(_EXTEND_HELP)


class ExtendSecondsSerializer(ReceiptSerializer):
    """extend's body as clients wrote it before ``lease`` was its name: still accepted, deprecated."""

    seconds = _lease_field(f"Deprecated: the old name of lease. {_EXTEND_HELP}", deprecated=True)


class ExtendBodySerializer(ReceiptSerializer):
    """Parses extend's body in either form (the schema shows them as ExtendSerializer and
    ExtendSecondsSerializer); ``validated_data["lease"]`` is the new length either way."""

    lease = _lease_field(_EXTEND_HELP, required=False)
    seconds = _lease_field(_EXTEND_HELP, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "seconds" in attrs:
            if "lease" in attrs:
                raise serializers.ValidationError('Send "lease" (or its old name "seconds"), not both.')
            attrs["lease"] = attrs.pop("seconds")
        elif "lease" not in attrs:
            raise serializers.ValidationError({"lease": ["This field is required."]})
        return attrs


class QueueListQuerySerializer(serializers.Serializer):
    """Query of GET queues/."""

    prefix = QueuePrefixField(required=False, default="", allow_blank=True, max_length=200)
    cursor = CursorField(required=False, default=None, allow_null=True, help_text="From a page's next link.")
    limit = QueryIntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Page size."
    )


class PageQuerySerializer(serializers.Serializer):
    """Query of the scheduled and dead-letter listings; with ?end=, of the items listing."""

    cursor = CursorField(required=False, default=None, allow_null=True, help_text="From a page's next link.")
    limit = QueryIntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Page size."
    )


class BrowseQuerySerializer(EndQuerySerializer, PageQuerySerializer):
    """Query of GET queues/{name}/items/: ?end=, then ?cursor= and ?limit=, checked in that order."""
