"""Items: how they are shown, pushed, popped and browsed."""

from __future__ import annotations

import datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from .fields import (
    WAIT_HELP,
    AwareDateTimeField,
    PriorityField,
    SecondsField,
    StrictCharField,
    StrictFieldsMixin,
    ValueField,
    delay_field,
    key_field,
    tenant_field,
)
from .limits import (
    DEDUP_KEY_MAX_LENGTH,
    DEDUP_WINDOW_SECONDS,
    ENDS,
    MAX_BATCH_ITEMS,
    MAX_WAIT_SECONDS,
    STATES_SCHEDULED,
)
from .pages import PageQuerySerializer, PageSerializer


_ATTEMPTS_HELP = "How many times the item has been claimed."


class ItemSerializer(serializers.Serializer[Any]):
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


class ItemListSerializer(serializers.Serializer[Any]):
    """The items a batch push stored, in the order given."""

    items = PushedItemSerializer(many=True)


class ItemRecordSerializer(serializers.Serializer[Any]):
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


@extend_schema_serializer(many=False)
class ItemPageSerializer(PageSerializer):
    """One page of items, in queue order from the requested end."""

    results = ItemSerializer(many=True)


@extend_schema_serializer(many=False)
class ScheduledPageSerializer(PageSerializer):
    """One page of leased and delayed items, by the time they become visible."""

    results = ScheduledItemSerializer(many=True)


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


class PushItemSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """One value to push; FIFO queues accept only priority 0."""

    value = ValueField(required=True)
    priority = PriorityField(default=0)
    dedup_key = _dedup_key_field()
    key = key_field()
    tenant = tenant_field()
    delay = delay_field(_PUSH_DELAY_HELP, required=False)
    not_before = _not_before_field()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        _one_schedule(attrs)
        return attrs


class PushBatchEntrySerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """One value of a batch."""

    value = ValueField(required=True)
    priority = PriorityField(default=0)


class PushBatchSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """Several values to push in one request; delay or not_before applies to all of them.

    (The schema's form of a batch: PushSerializer parses both forms, and refuses unknown fields.)
    """

    # many=True hands max_length to the ListSerializer; the stubs lack it (call-arg).
    items = PushBatchEntrySerializer(many=True, allow_empty=False, max_length=MAX_BATCH_ITEMS)  # type: ignore[call-arg]
    key = key_field()
    tenant = tenant_field()
    delay = delay_field(_PUSH_DELAY_HELP, required=False)
    not_before = _not_before_field()


class PushSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """POST queues/{name}/push/: either one item ({"value", "priority", ...}) or a batch ({"items": [...]})."""

    value = ValueField(required=False)
    priority = PriorityField(required=False)
    dedup_key = _dedup_key_field()
    key = key_field()
    tenant = tenant_field()
    delay = delay_field(_PUSH_DELAY_HELP, required=False)
    not_before = _not_before_field()
    items = PushBatchEntrySerializer(  # type: ignore[call-arg]  # max_length: as in PushBatchSerializer
        many=True, required=False, allow_empty=False, max_length=MAX_BATCH_ITEMS
    )

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


class EndQuerySerializer(serializers.Serializer[Any]):
    """?end= of pop and peek."""

    end = serializers.ChoiceField(choices=ENDS, default="min", help_text="Which end: min (default) or max.")


class PopQuerySerializer(EndQuerySerializer):
    """Query of POST queues/{name}/pop/: ?end= and ?wait= (long polling)."""

    wait = SecondsField(query=True, default=0, max_value=MAX_WAIT_SECONDS, help_text=WAIT_HELP)


class BrowseQuerySerializer(EndQuerySerializer, PageQuerySerializer):
    """Query of GET queues/{name}/items/: ?end=, then ?cursor= and ?limit=, checked in that order."""
