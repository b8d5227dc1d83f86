"""Field types of the REST API: strict about JSON types, taken as sent, refused with the codes the
service uses, so a client gets a field-level 400 before any transaction starts."""

from __future__ import annotations

import base64
import datetime
import math
import re
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from django_fdbqueue.exceptions import InvalidCursor

from .limits import (
    INT64_MAX,
    INT64_MIN,
    KEY_MAX_BYTES,
    TENANT_MAX_BYTES,
    MAX_DELAY_SECONDS,
    MAX_LEASE_SECONDS,
    MAX_WAIT_SECONDS,
    QUEUE_NAME_REGEX,
    RECEIPT_MAX_LENGTH,
)


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


class RecodedRefusalMixin:
    """Any refusal of a present value becomes one message with the service's code for the thing
    (``refusal`` = (message, code)), so a bad name, cursor or receipt reads the same over REST as
    from the service; a missing value keeps DRF's "required"."""

    refusal: tuple[str, str]

    def run_validation(self, data: Any = serializers.empty) -> Any:
        try:
            return super().run_validation(data)  # type: ignore[misc]
        except serializers.ValidationError as error:
            if data is serializers.empty:
                raise
            message, code = self.refusal
            raise serializers.ValidationError(message, code=code) from error


class QueueNameField(RecodedRefusalMixin, StrictRegexField):
    """A queue name, refused with the code the service and the URL routes use for bad names."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 200)
        super().__init__(rf"^{QUEUE_NAME_REGEX}\Z", **kwargs)

    refusal = ("1 to 200 characters of letters, digits, '.', '_' and '-', exactly as sent.", "invalid_queue_name")


class UntrimmedCharField(serializers.CharField):
    """A query string taken as sent: a cursor or prefix with stray spaces is refused, not "fixed"."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)


# Cursors are URL-safe base64 tokens; the service refuses anything else (invalid_cursor).
@extend_schema_field({"type": "string", "pattern": r"^[A-Za-z0-9_-]+$"})
class CursorField(RecodedRefusalMixin, UntrimmedCharField):
    """?cursor= of a listing: a page's next link carries it. Anything this field refuses (NUL, say)
    is refused with the code the service uses for bad cursors."""

    refusal = (InvalidCursor.default_message, InvalidCursor.code)


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


class ReceiptField(RecodedRefusalMixin, StrictCharField):
    """A lease's receipt; anything that cannot be one is refused with the service's code for it."""

    def __init__(self, **kwargs: Any) -> None:
        # An empty receipt was always refused; min_length puts that in the schema too.
        kwargs.setdefault("min_length", 1)
        kwargs.setdefault("max_length", RECEIPT_MAX_LENGTH)
        kwargs.setdefault("help_text", "The receipt a claim returned.")
        super().__init__(**kwargs)

    refusal = ("This is not a receipt handed out by a claim.", "invalid_receipt")


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


class RateField(SecondsField):
    """Claims per second (a queue's ``key_rate``): a JSON number above 0, or null."""

    default_error_messages = {
        "invalid": "A number of claims per second is required.",
        "not_positive": "Must be greater than 0.",
    }


class LabelField(StrictCharField):
    """A short label stored in keys (a limit ``key``, a ``tenant``): at most ``max_bytes`` bytes of
    UTF-8, counted as the service counts them."""

    def __init__(self, *, max_bytes: int, **kwargs: Any) -> None:
        self.max_bytes = max_bytes
        super().__init__(required=False, min_length=1, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if len(value.encode("utf-8")) > self.max_bytes:
            raise serializers.ValidationError(f"At most {self.max_bytes} bytes of UTF-8.")
        return value


def key_field() -> LabelField:
    return LabelField(
        max_bytes=KEY_MAX_BYTES,
        help_text=f"The item's limit key (a customer id, an API host): 1 to {KEY_MAX_BYTES} bytes of UTF-8. "
        "The queue's key_concurrency and key_rate limit claims per key; items without a key are not limited.",
    )


def tenant_field() -> LabelField:
    return LabelField(
        max_bytes=TENANT_MAX_BYTES,
        help_text=f"The item's tenant, required on a queue split by tenant and refused on any other: 1 to "
        f"{TENANT_MAX_BYTES} bytes of UTF-8. Pops and claims take from the tenants in turn.",
    )


class StrictBooleanField(serializers.BooleanField):
    """A JSON true or false, nothing else (no "yes", 1 or "true")."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


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


class StrictFieldsMixin:
    """Refuse fields the serializer does not know: a typo ("prio") must not be silently dropped."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))  # type: ignore[attr-defined]
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
        return super().to_internal_value(data)  # type: ignore[misc]


def delay_field(help_text: str, **kwargs: Any) -> SecondsField:
    """Seconds before an item becomes visible: push's and release's ``delay``."""
    return SecondsField(max_value=MAX_DELAY_SECONDS, help_text=help_text, **kwargs)


def lease_field(help_text: str, **kwargs: Any) -> SecondsField:
    """Seconds from now until a lease ends: claim's and extend's ``lease``, with one set of bounds."""
    return SecondsField(positive=True, max_value=MAX_LEASE_SECONDS, help_text=help_text, **kwargs)


WAIT_HELP = f"Seconds to wait for an item when none is visible (0 to {MAX_WAIT_SECONDS:g}; default 0: answer at once)."
