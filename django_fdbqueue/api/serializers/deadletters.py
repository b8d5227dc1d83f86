"""Dead letters: items claimed max_attempts times without an ack, as their listing shows them."""

from __future__ import annotations

import datetime

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from .items import ItemRecordSerializer
from .pages import PageSerializer


class DeadLetterSerializer(ItemRecordSerializer):
    """An item that was claimed max_attempts times without an ack."""

    died_at = serializers.DateTimeField(default_timezone=datetime.timezone.utc)


@extend_schema_serializer(many=False)
class DeadLetterPageSerializer(PageSerializer):
    """One page of dead letters, in queue order."""

    results = DeadLetterSerializer(many=True)
