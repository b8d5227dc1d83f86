"""Serializers of the REST API: they validate requests and shape responses, nothing else.

The queue service does the work and has the final word on every rule; the checks here exist so a
client gets a field-level 400 before any transaction starts. One module per resource (``queues``,
``items``, ``leases``, ``deadletters``), with what they share beside them: ``limits`` (bounds and
choices), ``fields`` (the strict field types), ``pages`` (paged listings) and ``errors`` (error
bodies). This package re-exports what the views use.
"""

from .deadletters import DeadLetterPageSerializer, DeadLetterSerializer
from .errors import (
    ErrorSerializer,
    LeaseGoneErrorSerializer,
    UnavailableErrorSerializer,
    ValidationErrorSerializer,
)
from .fields import StrictFieldsMixin
from .items import (
    BrowseQuerySerializer,
    EndQuerySerializer,
    ItemListSerializer,
    ItemPageSerializer,
    ItemSerializer,
    PopQuerySerializer,
    PushBatchSerializer,
    PushedItemSerializer,
    PushItemSerializer,
    PushSerializer,
    ScheduledItemSerializer,
    ScheduledPageSerializer,
)
from .leases import (
    ClaimSerializer,
    ExtendBodySerializer,
    ExtendSecondsSerializer,
    ExtendSerializer,
    LeaseSerializer,
    LeaseTimeSerializer,
    ReceiptSerializer,
    ReleasedSerializer,
    ReleaseSerializer,
)
from .limits import DEDUP_WINDOW_SECONDS, MAX_WAIT_SECONDS, QUEUE_NAME_REGEX
from .pages import PageQuerySerializer
from .queues import (
    QueueCreateSerializer,
    QueueListQuerySerializer,
    QueuePageSerializer,
    QueueSerializer,
    QueueUpdateSerializer,
)

__all__ = [
    "DEDUP_WINDOW_SECONDS",
    "MAX_WAIT_SECONDS",
    "QUEUE_NAME_REGEX",
    "BrowseQuerySerializer",
    "ClaimSerializer",
    "DeadLetterPageSerializer",
    "DeadLetterSerializer",
    "EndQuerySerializer",
    "ErrorSerializer",
    "ExtendBodySerializer",
    "ExtendSecondsSerializer",
    "ExtendSerializer",
    "ItemListSerializer",
    "ItemPageSerializer",
    "ItemSerializer",
    "LeaseGoneErrorSerializer",
    "LeaseSerializer",
    "LeaseTimeSerializer",
    "PageQuerySerializer",
    "PopQuerySerializer",
    "PushBatchSerializer",
    "PushedItemSerializer",
    "PushItemSerializer",
    "PushSerializer",
    "QueueCreateSerializer",
    "QueueListQuerySerializer",
    "QueuePageSerializer",
    "QueueSerializer",
    "QueueUpdateSerializer",
    "ReceiptSerializer",
    "ReleasedSerializer",
    "ReleaseSerializer",
    "ScheduledItemSerializer",
    "ScheduledPageSerializer",
    "StrictFieldsMixin",
    "UnavailableErrorSerializer",
    "ValidationErrorSerializer",
]
