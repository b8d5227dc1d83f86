"""Leases: claiming an item, and acking, releasing or extending it by its receipt."""

from __future__ import annotations

import datetime
from typing import Any

from rest_framework import serializers

from .fields import (
    WAIT_HELP,
    ReceiptField,
    SecondsField,
    StrictFieldsMixin,
    StrictIntegerField,
    delay_field,
    lease_field,
)
from .items import ItemSerializer
from .limits import DEFAULT_LEASE_SECONDS, ENDS, MAX_LEASE_SECONDS, MAX_SPREAD, MAX_WAIT_SECONDS, STATES_RELEASED


class LeaseTimeSerializer(serializers.Serializer[Any]):
    """A lease's receipt and end, as extend returns them."""

    receipt = serializers.CharField(help_text="Pass it to ack, release or extend. Keep it secret.")
    lease_expires_at = serializers.DateTimeField(
        default_timezone=datetime.timezone.utc, help_text="When the lease ends unless extended (ISO 8601, UTC)."
    )


class LeaseSerializer(LeaseTimeSerializer):
    """A claimed item with its lease; the item comes back to the queue unless acked before the end."""

    item = ItemSerializer()


class ReleasedSerializer(serializers.Serializer[Any]):
    """Where a released item went."""

    state = serializers.ChoiceField(
        choices=STATES_RELEASED,
        help_text="ready (claimable now), delayed (after the delay), or dead (it had been claimed max_attempts times).",
    )


class ClaimSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """POST queues/{name}/claim/."""

    lease = lease_field(
        f"Seconds the item stays invisible to others (more than 0, at most {MAX_LEASE_SECONDS:g}; "
        f"default {DEFAULT_LEASE_SECONDS:g}).",
        default=DEFAULT_LEASE_SECONDS,
    )
    wait = SecondsField(default=0, max_value=MAX_WAIT_SECONDS, help_text=WAIT_HELP)
    end = serializers.ChoiceField(choices=ENDS, default="min", help_text="Which end: min (default) or max.")
    spread = StrictIntegerField(
        required=False,
        min_value=2,
        max_value=MAX_SPREAD,
        help_text=f"Take one of the first `spread` ready items at random (2 to {MAX_SPREAD}) instead of the "
        "first: many claimers of one queue then rarely collide, and an item may be claimed before up to "
        "spread - 1 items ahead of it. Leave it out for exact order. Ignored on queues with key limits "
        "or split by tenant.",
    )


class ReceiptSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """POST queues/{name}/ack/."""

    receipt = ReceiptField()


class ReleaseSerializer(ReceiptSerializer):
    """POST queues/{name}/release/."""

    delay = delay_field("Seconds before the item becomes visible again (default 0: at once).", default=0)


_EXTEND_HELP = (
    f"The lease now ends this many seconds from now (more than 0, at most {MAX_LEASE_SECONDS:g}), as claim's lease."
)


class ExtendSerializer(ReceiptSerializer):
    """POST queues/{name}/extend/: the receipt and the new ``lease``, named as claim names it."""

    lease = lease_field(_EXTEND_HELP)


class ExtendSecondsSerializer(ReceiptSerializer):
    """extend's body as clients wrote it before ``lease`` was its name: still accepted, deprecated."""

    seconds = lease_field(f"Deprecated: the old name of lease. {_EXTEND_HELP}", deprecated=True)


class ExtendBodySerializer(ReceiptSerializer):
    """Parses extend's body in either form (the schema shows them as ExtendSerializer and
    ExtendSecondsSerializer); ``validated_data["lease"]`` is the new length either way."""

    lease = lease_field(_EXTEND_HELP, required=False)
    seconds = lease_field(_EXTEND_HELP, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "seconds" in attrs:
            if "lease" in attrs:
                raise serializers.ValidationError('Send "lease" (or its old name "seconds"), not both.')
            attrs["lease"] = attrs.pop("seconds")
        elif "lease" not in attrs:
            raise serializers.ValidationError({"lease": ["This field is required."]})
        return attrs
