"""Error bodies of the REST API, as the schema documents them."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from .limits import LEASE_GONE_REASONS


class ErrorSerializer(serializers.Serializer[Any]):
    """Every error body: a message for people and a stable code for programs."""

    detail = serializers.CharField(help_text="What went wrong, in words.")
    code = serializers.CharField(help_text="Stable machine-readable error code.")


class ValidationErrorSerializer(ErrorSerializer):
    """A 400 for invalid input also lists the problems per field."""

    # A field (the metaclass moves it to _declared_fields), not Serializer's `errors`, which mypy sees.
    errors = serializers.DictField(  # type: ignore[assignment]
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
