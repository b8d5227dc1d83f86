"""The REST API's bounds and choices: what its fields accept and its schema documents."""

from __future__ import annotations

from django_fdbqueue import service
from django_fdbqueue.exceptions import LeaseExpired, LeaseNotFound

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
# A spread claim's widest choice (service.spread): it reads that many items first.
MAX_SPREAD = service.MAX_SPREAD
DEDUP_WINDOW_SECONDS = service.DEDUP_WINDOW_SECONDS
DEDUP_KEY_MAX_LENGTH = 200
# Receipts are tokens of the service; none is longer than this.
RECEIPT_MAX_LENGTH = 2_000
STATES_SCHEDULED = ("leased", "delayed")
STATES_RELEASED = ("ready", "delayed", "dead")
LEASE_GONE_REASONS = (LeaseExpired.reason, LeaseNotFound.reason)
# Per-key limits (service.keylimits): a push's key, and a queue's key_concurrency and key_rate.
KEY_MAX_BYTES = service.KEY_MAX_BYTES
KEY_CONCURRENCY_MAX = 1_000_000
KEY_RATE_MAX = 1_000_000.0
# Queues split by tenant (service.tenantkeys): a push's tenant.
TENANT_MAX_BYTES = service.TENANT_MAX_BYTES
