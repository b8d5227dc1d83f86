"""Queues: how they are shown and listed, created and changed."""

from __future__ import annotations

import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.reverse import reverse

from django_fdbqueue.paths import name_to_segment

from .fields import (
    CursorField,
    QueryIntegerField,
    QueueNameField,
    QueuePrefixField,
    RateField,
    StrictBooleanField,
    StrictFieldsMixin,
    StrictIntegerField,
)
from .limits import DEFAULT_LIMIT, KEY_CONCURRENCY_MAX, KEY_RATE_MAX, KINDS, MAX_ATTEMPTS_LIMIT, MAX_LIMIT
from .pages import PageSerializer


class QueueSerializer(serializers.Serializer[Any]):
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
    leased = serializers.IntegerField(
        help_text="Items claimed and not yet acked or released. A lease that ran out counts here until "
        "the next pop or claim of the queue takes it back."
    )
    delayed = serializers.IntegerField(
        help_text="Items pushed or released with a delay, until the next pop or claim after the delay "
        "moves them into the ready items."
    )
    dead = serializers.IntegerField(help_text="Dead letters.")
    max_attempts = serializers.IntegerField(
        allow_null=True, help_text="Claims without an ack after which an item becomes a dead letter; null: no limit."
    )
    key_concurrency = serializers.IntegerField(
        allow_null=True, help_text="Most items of one key leased at once; null: no limit."
    )
    key_rate = serializers.FloatField(allow_null=True, help_text="Most claims per second per key; null: no limit.")
    tenants = serializers.IntegerField(
        allow_null=True, help_text="On a queue split by tenant, the tenants with ready items; null on other queues."
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


def _key_concurrency_field(**kwargs: Any) -> StrictIntegerField:
    return StrictIntegerField(
        min_value=1,
        max_value=KEY_CONCURRENCY_MAX,
        allow_null=True,
        help_text=f"1 to {KEY_CONCURRENCY_MAX:,}: most items pushed with the same key leased at once; null: no limit.",
        **kwargs,
    )


def _key_rate_field(**kwargs: Any) -> RateField:
    return RateField(
        positive=True,
        max_value=KEY_RATE_MAX,
        allow_null=True,
        help_text="Most claims per second of items with the same key (a token bucket of max(1, rate) tokens), "
        "above 0; null: no limit.",
        **kwargs,
    )


class QueueCreateSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """POST queues/."""

    name = QueueNameField()
    kind = serializers.ChoiceField(choices=KINDS, default="fifo")
    max_attempts = _max_attempts_field(default=None)
    key_concurrency = _key_concurrency_field(default=None)
    key_rate = _key_rate_field(default=None)
    tenants = StrictBooleanField(
        default=False,
        help_text="Split the queue by tenant: every push names its tenant, and pops and claims take from "
        "the tenants in turn. Fixed at creation; not with key_concurrency or key_rate.",
    )


class QueueUpdateSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """PATCH queues/{name}/: the settings a queue may change. Absent, nothing changes (as
    PATCH goes, and as the schema, which documents PATCH bodies as partial, says)."""

    max_attempts = _max_attempts_field(required=False)
    key_concurrency = _key_concurrency_field(required=False)
    key_rate = _key_rate_field(required=False)


class KeyCountSerializer(serializers.Serializer[Any]):
    """One key and the leases its items hold."""

    key = serializers.CharField()
    leased = serializers.IntegerField()


class KeyLimitStateSerializer(serializers.Serializer[Any]):
    """GET queues/{name}/key-limits/: the queue's per-key limits and where its keys stand."""

    name = serializers.CharField()
    concurrency = serializers.IntegerField(allow_null=True, help_text="key_concurrency; null: no limit.")
    rate = serializers.FloatField(allow_null=True, help_text="key_rate; null: no limit.")
    keys_leased = serializers.IntegerField(help_text="How many keys hold at least one lease.")
    leased = KeyCountSerializer(
        many=True,
        help_text="The keys holding the most leases, most first. A lease that ran out counts "
        "until the next pop or claim of the queue takes it back (a claim does so before it counts).",
    )
    at_limit = serializers.ListField(
        child=serializers.CharField(),
        help_text="Keys with as many leases as key_concurrency allows, "
        "leases that ran out included until the next pop or claim takes them back.",
    )

    def to_representation(self, state: Any) -> dict[str, Any]:
        return {
            "name": state.name,
            "concurrency": state.concurrency,
            "rate": state.rate,
            "keys_leased": state.keys_leased,
            "leased": [{"key": key, "leased": count} for key, count in state.leased],
            "at_limit": list(state.at_limit),
        }


class KeyLimitQuerySerializer(serializers.Serializer[Any]):
    """Query of GET queues/{name}/key-limits/."""

    top = QueryIntegerField(required=False, default=20, min_value=1, max_value=MAX_LIMIT, help_text="Keys shown.")


class QueueListQuerySerializer(serializers.Serializer[Any]):
    """Query of GET queues/."""

    prefix = QueuePrefixField(required=False, default="", allow_blank=True, max_length=200)
    cursor = CursorField(required=False, default=None, allow_null=True, help_text="From a page's next link.")
    limit = QueryIntegerField(
        required=False, default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Page size."
    )
